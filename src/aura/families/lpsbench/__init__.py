"""The LPS-Bench family: long-horizon tool-using agents over MCP tools served by an LM-emulated environment."""
