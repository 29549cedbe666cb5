// kirod console: sign-in from a one-time link, actions, countdowns and live updates.
// The pages are complete without this script; it only adds what needs one.
"use strict";

(function () {
  const csrfMeta = document.querySelector('meta[name="kirod-csrf"]');
  const csrf = csrfMeta ? csrfMeta.content : "";
  const notice = document.getElementById("notice");

  function say(text, bad) {
    if (!notice) return;
    notice.textContent = text;
    notice.className = bad ? "bad" : "good";
  }

  async function call(method, path, body) {
    const init = { method: method, headers: { "X-Kirod-Console-CSRF": csrf }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch("/console" + path, init);
    let data = {};
    try { data = await response.json(); } catch (e) { data = {}; }
    if (!response.ok) {
      const message = data.error && data.error.message ? data.error.message : "HTTP " + response.status;
      throw new Error(message);
    }
    return data;
  }

  // --- sign-in: the token rides in the fragment, which is never sent to a server ------------
  async function signIn() {
    const match = /^#t=([A-Za-z0-9_-]{1,200})$/.exec(location.hash);
    history.replaceState(null, "", location.pathname + location.search);
    const target = document.getElementById("signin");
    if (!match) {
      target.textContent = "You are signed out.";
      return;
    }
    const response = await fetch("/console/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: match[1] }),
      credentials: "same-origin",
    });
    if (response.ok) {
      location.reload();
      return;
    }
    let message = "This link cannot sign you in.";
    try { message = (await response.json()).error.message; } catch (e) { /* keep the default */ }
    target.textContent = message;
    target.className = "bad";
  }

  // --- countdowns ---------------------------------------------------------------------------
  function span(seconds) {
    const s = Math.abs(seconds);
    if (s < 60) return Math.round(s) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + Math.floor(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function tick() {
    const now = Date.now() / 1000;
    for (const el of document.querySelectorAll('[data-kind="until"]')) {
      const at = parseFloat(el.dataset.until);
      if (isNaN(at)) { el.textContent = "—"; continue; }
      el.textContent = at >= now ? "in " + span(at - now) : span(now - at) + " ago";
    }
  }

  // --- live updates -------------------------------------------------------------------------
  function apply(fields) {
    for (const [key, value] of Object.entries(fields)) {
      for (const el of document.querySelectorAll('[data-k="' + CSS.escape(key) + '"]')) {
        if (el.dataset.kind === "until") el.dataset.until = value;
        else if (el.tagName === "PROGRESS") el.value = parseFloat(value) || 0;
        else el.textContent = value;
        if (key.endsWith(".status")) {
          const card = el.closest("[data-status]");
          if (card) card.dataset.status = value.replace(/ /g, "_");
        }
        if (key === "health") {
          const summary = el.closest("[data-health]");
          if (summary) summary.dataset.health = value;
        }
      }
    }
    tick();
  }

  function follow() {
    const source = new EventSource("/console/events");
    source.addEventListener("fields", (event) => apply(JSON.parse(event.data)));
    source.addEventListener("reload", () => { source.close(); location.reload(); });
    window.addEventListener("pagehide", () => source.close());
  }

  // --- actions ------------------------------------------------------------------------------
  const ACCOUNT_ACTIONS = {
    enable: ["POST", "/enable", "enabled"],
    disable: ["POST", "/disable", "disabled"],
    refresh: ["POST", "/refresh", "token refreshed"],
    probe: ["POST", "/probe", "usage probed"],
    remove: ["DELETE", "", "removed"],
  };

  async function act(button) {
    const act = button.dataset.act;
    const id = button.dataset.id;
    button.disabled = true;
    try {
      if (act === "signout") {
        await call("POST", "/signout");
        location.assign("/console/");
        return;
      }
      if (act === "revoke") {
        if (!confirm("Revoke this key? Clients using it stop working.")) return;
        await call("DELETE", "/api/keys/" + encodeURIComponent(id));
        location.reload();
        return;
      }
      if (act === "cancel-login") {
        if (currentLogin) await call("DELETE", "/api/logins/" + encodeURIComponent(currentLogin));
        return;
      }
      const spec = ACCOUNT_ACTIONS[act];
      if (!spec) return;
      if (act === "remove" && !confirm("Remove this account from kirod? Its tokens are deleted.")) return;
      await call(spec[0], "/api/accounts/" + encodeURIComponent(id) + spec[1]);
      say("Account " + spec[2] + ".", false);
      setTimeout(() => location.reload(), 400);
    } catch (error) {
      say(error.message, true);
    } finally {
      button.disabled = false;
    }
  }

  let currentLogin = null;

  async function followLogin(login) {
    currentLogin = login.id;
    const state = document.getElementById("device-state");
    const link = document.getElementById("device-link");
    link.href = login.verification_uri_complete || login.verification_uri;
    link.textContent = login.verification_uri;
    document.getElementById("device-code").textContent = login.user_code;
    document.getElementById("device").hidden = false;
    let current = login;
    for (let round = 0; round < 120 && current.state === "pending"; round++) {
      current = await call("GET", "/api/logins/" + encodeURIComponent(login.id) + "?wait=10");
    }
    currentLogin = null;
    if (current.state === "approved") {
      state.textContent = "Approved: account " + (current.account ? current.account.label : "") + " added.";
      state.className = "good";
    } else {
      state.textContent = "The login ended: " + current.state +
        (current.error && current.error.message ? " (" + current.error.message + ")" : "");
      state.className = "bad";
    }
  }

  function fileBase64(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
      reader.onerror = () => reject(new Error("the file cannot be read"));
      reader.readAsDataURL(file);
    });
  }

  // A budget field: empty is no limit (null); a number otherwise.
  function limit(data, name, whole) {
    const text = String(data.get(name) || "").trim();
    if (!text) return null;
    return whole ? parseInt(text, 10) : parseFloat(text);
  }

  // Choosing a key or an account in a budget form shows its current budget, to change from.
  function fill(select) {
    const chosen = select.selectedOptions[0];
    if (!chosen) return;
    for (const [name, value] of Object.entries(chosen.dataset)) {
      const input = select.form.elements.namedItem(name);
      if (!input) continue;
      if (input.type === "checkbox") input.checked = value === "true";
      else input.value = value;
    }
  }

  async function submit(form) {
    const data = new FormData(form);
    const kind = form.dataset.form;
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      if (kind === "key") {
        const models = String(data.get("models") || "").split(",").map((s) => s.trim()).filter(Boolean);
        const body = { name: String(data.get("name") || ""), models: models };
        const rpm = String(data.get("rpm") || "");
        if (rpm) body.rpm = parseInt(rpm, 10);
        for (const [name, whole] of [["credits_per_day", false], ["credits_per_month", false], ["tokens_per_minute", true]]) {
          const value = limit(data, name, whole);
          if (value !== null) body[name] = value;
        }
        const created = await call("POST", "/api/keys", body);
        document.getElementById("secret-value").textContent = created.secret;
        document.getElementById("secret").hidden = false;
        say("Key " + created.key.name + " created.", false);
        form.reset();
      } else if (kind === "key-budget" || kind === "account-budget") {
        const key = kind === "key-budget";
        const select = form.elements.namedItem(key ? "key" : "account");
        const body = {
          credits_per_day: limit(data, "credits_per_day", false),
          credits_per_month: limit(data, "credits_per_month", false),
        };
        if (key) body.tokens_per_minute = limit(data, "tokens_per_minute", true);
        else body.allow_overage = data.get("allow_overage") === "on";
        const path = (key ? "/api/keys/" : "/api/accounts/") + encodeURIComponent(select.value) + "/budget";
        await call("PUT", path, body);
        say("Budget of " + select.selectedOptions[0].textContent + " set.", false);
        setTimeout(() => location.reload(), 400);
      } else if (kind === "login") {
        const body = {};
        for (const name of ["start_url", "region"]) {
          const value = String(data.get(name) || "").trim();
          if (value) body[name] = value;
        }
        await followLogin(await call("POST", "/api/logins", body));
      } else if (kind === "import") {
        const file = data.get("file");
        const body = { content_b64: await fileBase64(file) };
        const label = String(data.get("label") || "").trim();
        if (label) body.label = label;
        const imported = await call("POST", "/api/accounts/import", body);
        const labels = imported.accounts.map((a) => a.label).join(", ");
        say("Imported: " + labels + ".", false);
        form.reset();
      }
    } catch (error) {
      say(error.message, true);
    } finally {
      button.disabled = false;
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-act]");
    if (button) act(button);
  });
  document.addEventListener("change", (event) => {
    if (event.target.matches("select[data-fill]")) fill(event.target);
  });
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-form]");
    if (!form) return;
    event.preventDefault();
    submit(form);
  });

  if (document.querySelector("[data-signin]")) signIn();
  tick();
  setInterval(tick, 1000);
  if (document.querySelector("[data-live]")) follow();
})();
