// Every label is POSTed the moment it is picked (click or digit key); n / p move to the next / previous item.
(function () {
  async function pick(form, button) {
    const status = form.parentElement.querySelector(".status");
    status.textContent = "saving " + button.dataset.label + " ...";
    try {
      const resp = await fetch(form.dataset.api, {
        method: "POST", headers: {"Content-Type": "application/json"}, credentials: "same-origin",
        body: JSON.stringify({index: Number(form.dataset.index), unit: form.dataset.unit, label: button.dataset.label}),
      });
      const body = await resp.json();
      if (!resp.ok) throw new Error(body.error || resp.statusText);
      form.querySelectorAll(".option").forEach((b) => b.classList.toggle("chosen", b === button));
      status.textContent = "saved: " + body.label;
      const progress = document.getElementById("progress");
      if (progress && body.total) progress.textContent = body.done + " of " + body.total + " labelled";
    } catch (err) {
      status.textContent = "NOT saved: " + err.message;
      status.classList.add("error");
    }
  }
  document.querySelectorAll("form.options").forEach((form) => {
    form.querySelectorAll(".option").forEach((b) => b.addEventListener("click", () => pick(form, b)));
  });
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.target.tagName === "INPUT") return;
    const forms = document.querySelectorAll("form.options");
    if (/^[0-9]$/.test(e.key) && forms.length === 1) {
      const b = forms[0].querySelector('.option[data-key="' + e.key + '"]');
      if (b) pick(forms[0], b);
    } else if (e.key === "n" || e.key === "p") {
      const link = document.getElementById(e.key === "n" ? "next" : "prev");
      if (link) window.location.href = link.href;
    }
  });
})();
