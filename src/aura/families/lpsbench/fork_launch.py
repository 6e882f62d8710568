"""The tool server's stand-in process when a fork server runs (fork_server.py): what the MCP client starts.

    python -S -E fork_launch.py <socket> <module> [args...]

It imports only the standard library (it starts in a few milliseconds), hands its stdin, stdout and stderr, its
working folder, its environment and ``<module> args`` to the fork server over the Unix socket, and waits: the
server forks a child that runs ``<module>.main(args)`` on those very file descriptors (the MCP wire), and
sends back its exit status when it ends, which this process exits with. When this process dies (the client
closes the session and kills it), the socket closes and the fork server kills the child's whole process group.
"""
import json
import os
import socket
import sys


def main() -> int:
    path, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    msg = json.dumps({"module": module, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        socket.send_fds(conn, [len(msg).to_bytes(4, "big") + msg], [0, 1, 2])
    except OSError as exc:
        print(f"error: the lpsbench fork server at {path} is not answering: {exc}", file=sys.stderr)
        return 2
    status = b""
    while True:
        chunk = conn.recv(64)
        if not chunk:
            break
        status += chunk
    return int(status) if status.strip().lstrip(b"-").isdigit() else 1


if __name__ == "__main__":
    sys.exit(main())
