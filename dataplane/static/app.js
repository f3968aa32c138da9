// The campaign page: a countdown on the server's clock, one purchase per click, the
// proof of work when the campaign asks for it, payment, and the content once delivered.
"use strict";
(() => {
  const id = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
  const $ = (name) => document.getElementById(name);
  let offset = 0; // the server's clock minus this one, in ms
  let campaign = null;
  let token = localStorage.getItem("seckill.token");
  let sending = false; // a purchase is on its way: no second one
  let owned = false; // a unit is held or bought
  let waitUntil = 0; // after a refusal with Retry-After
  let attempt = null; // this purchase's Idempotency-Key, kept until a definite answer

  async function api(method, path, body, headers = {}) {
    const h = { ...headers };
    if (token) h.Authorization = "Bearer " + token;
    if (body !== undefined) h["Content-Type"] = "application/json";
    const r = await fetch(path, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = {};
    try {
      data = await r.json();
    } catch (_) {
      // an empty body
    }
    return { status: r.status, data, retryAfter: Number(r.headers.get("Retry-After") || 0) };
  }

  // The server's clock, from the fastest of three round trips, half of it added.
  async function syncClock() {
    let best = null;
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const r = await fetch("/api/time", { cache: "no-store" }).then((x) => x.json()).catch(() => null);
      const t1 = Date.now();
      if (!r) continue;
      const rtt = t1 - t0;
      if (!best || rtt < best.rtt) best = { rtt, offset: r.now_ms + rtt / 2 - t1 };
    }
    if (best) offset = best.offset;
  }
  const now = () => Date.now() + offset;

  function say(text, kind = "") {
    $("message").textContent = text;
    $("message").className = "message " + kind;
  }

  const STATES = {
    armed: "Opens soon",
    live: "On sale",
    sold_out: "Sold out",
    paused: "Paused",
    ended: "Ended",
  };

  function show() {
    if (!campaign) return;
    document.title = campaign.name + " — seckill";
    $("name").textContent = campaign.name;
    $("price").textContent = (campaign.price_cents / 100).toFixed(2);
    const early = campaign.starts_at_ms && now() < campaign.starts_at_ms;
    const state = campaign.state === "live" && early ? "armed" : campaign.state;
    $("state").textContent = STATES[state] || state;
    $("state").className = "state " + state;
    if (!owned && (state === "sold_out" || state === "ended")) {
      say(state === "sold_out" ? REFUSALS.sold_out : REFUSALS.ended, "error");
    } else if (!owned && state === "live" && $("message").textContent === REFUSALS.sold_out) {
      say(""); // units came back (holds expired): buying is possible again
    }
    $("remaining").textContent = Math.max(0, campaign.remaining);
    $("total").textContent = campaign.total;
    const left = campaign.total ? Math.max(0, campaign.remaining) / campaign.total : 0;
    $("bar-fill").style.width = (left * 100).toFixed(1) + "%";
  }

  function open() {
    if (!campaign) return false;
    const t = now();
    if (campaign.starts_at_ms && t < campaign.starts_at_ms) return false;
    if (campaign.ends_at_ms && t >= campaign.ends_at_ms) return false;
    return campaign.state === "live";
  }

  function tick() {
    if (!campaign) return;
    if (campaign.starts_at_ms && Math.abs(now() - campaign.starts_at_ms) < 300) show();
    const t = now();
    const start = campaign.starts_at_ms;
    let text = "";
    if (start && t < start && (campaign.state === "armed" || campaign.state === "live")) {
      const s = Math.ceil((start - t) / 1000);
      const hh = String(Math.floor(s / 3600)).padStart(2, "0");
      const mm = String(Math.floor(s / 60) % 60).padStart(2, "0");
      const ss = String(s % 60).padStart(2, "0");
      text = "Opens in " + hh + ":" + mm + ":" + ss;
    } else if (campaign.state === "armed") {
      text = "Opens when the shop starts the sale";
    }
    $("countdown").textContent = text;
    $("buy").disabled = !token || sending || owned || t < waitUntil || !open();
  }

  function signedIn(user) {
    $("signin").hidden = true;
    $("who").hidden = false;
    $("who").textContent = "Signed in as " + user;
  }

  async function signIn(event) {
    event.preventDefault();
    const user = $("user").value.trim();
    const r = await api("POST", "/api/session", { user_id: user });
    if (r.status === 200) {
      token = r.data.token;
      localStorage.setItem("seckill.token", token);
      localStorage.setItem("seckill.user", user);
      signedIn(user);
      say("");
    } else if (r.status === 404) {
      say("Sign in through the shop, then come back here.", "error");
    } else {
      say(r.data.message || "Could not sign in.", "error");
    }
    tick();
  }

  // SHA-256(prefix ‖ nonce) must start with `difficulty` zero bits.
  async function solve(prefix, difficulty) {
    const enc = new TextEncoder();
    const zeroBits = (bytes) => {
      let n = 0;
      for (const b of bytes) {
        if (b === 0) {
          n += 8;
          continue;
        }
        return n + Math.clz32(b) - 24;
      }
      return n;
    };
    for (let n = 0; ; n++) {
      const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(prefix + n)));
      if (zeroBits(hash) >= difficulty) return String(n);
    }
  }

  async function ticket() {
    say("Proving you are a person (a few seconds of work)…");
    const c = await api("POST", `/api/campaigns/${id}/challenge`);
    if (c.status !== 200) return { refusal: c };
    const nonce = await solve(c.data.prefix, c.data.difficulty);
    const t = await api("POST", `/api/campaigns/${id}/ticket`, {
      challenge_id: c.data.challenge_id,
      nonce,
    });
    return t.status === 200 ? { ticket: t.data.ticket } : { refusal: t };
  }

  const REFUSALS = {
    sold_out: "Sold out: every unit is taken.",
    not_enough_stock: "Not enough left.",
    limit_reached: "You already have as many as one buyer may.",
    rate_limited: "Too many tries. Wait a moment.",
    busy: "Very busy right now. Try again in a moment.",
    unavailable: "The shop is having trouble. Try again in a moment.",
    not_started: "Not open yet.",
    paused: "The sale is paused.",
    ended: "The sale has ended.",
    ticket_invalid: "The check did not pass. Try again.",
    tickets_exhausted: "The sale has all the buyers it can take.",
    blocked: "Access denied.",
    unauthenticated: "Please sign in again.",
  };
  // Answers after which this shopper cannot buy here again (sold out is not one: units
  // come back when holds expire).
  const FINAL = new Set(["limit_reached", "ended", "tickets_exhausted", "blocked"]);

  function refused(r) {
    const code = r.data.error;
    say(REFUSALS[code] || r.data.message || "Something went wrong.", "error");
    if (code === "unauthenticated") {
      token = null;
      localStorage.removeItem("seckill.token");
      $("signin").hidden = false;
      $("who").hidden = true;
    }
    if (code === "limit_reached") owned = true;
    if (FINAL.has(code)) {
      $("buy").hidden = code !== "limit_reached";
      owned = true;
    }
    if (r.retryAfter) waitUntil = now() + r.retryAfter * 1000;
    if (code === "sold_out") waitUntil = now() + 2000;
  }

  async function buy() {
    if (sending || owned || !open()) return;
    sending = true;
    tick();
    try {
      let body = { quantity: 1 };
      if (campaign.require_ticket) {
        const t = await ticket();
        if (t.refusal) return refused(t.refusal);
        body.ticket = t.ticket;
      }
      say("Buying…");
      // A purchase whose answer was lost is sent again with the same key: the server
      // then answers with the unit it took, not a second one or "limit reached".
      attempt = attempt || (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
      const r = await api("POST", `/api/campaigns/${id}/purchase`, body, { "Idempotency-Key": attempt });
      if (r.status >= 500 || r.status === 408) return refused(r);
      attempt = null;
      if (r.status !== 200) return refused(r);
      owned = true;
      $("order").hidden = false;
      $("order-id").textContent = r.data.order_id;
      $("order-status").textContent = "held for you";
      const by = new Date(r.data.pay_by_ms - offset);
      $("pay-by").textContent = "Pay before " + by.toLocaleTimeString() + " to keep it.";
      $("pay").dataset.order = r.data.order_id;
      say("It is held for you. Pay to make it yours.", "ok");
    } catch (e) {
      say("The network failed. Try again.", "error");
    } finally {
      sending = false;
      tick();
    }
  }

  async function pay() {
    const order = $("pay").dataset.order;
    $("pay").disabled = true;
    let r;
    try {
      r = await api("POST", `/api/orders/${order}/pay`);
    } catch (_) {
      $("pay").disabled = false;
      say("The network failed. Press Pay again (you will not pay twice).", "error");
      return;
    }
    if (r.status !== 200) {
      $("pay").disabled = r.data.error === "expired";
      say(r.data.error === "expired" ? "The hold expired before payment." : r.data.message, "error");
      return;
    }
    $("order-status").textContent = "paid";
    $("pay").hidden = true;
    $("pay-by").hidden = true;
    say("Paid. Your copy is on its way…", "ok");
    for (let i = 0; i < 120; i++) {
      const o = await api("GET", `/api/orders/${order}`).catch(() => ({ status: 0, data: {} }));
      if (o.status === 200 && o.data.status === "delivered") {
        $("order-status").textContent = "delivered";
        $("delivered").hidden = false;
        $("license").textContent = o.data.license_key;
        if (o.data.download_url) {
          $("download").href = o.data.download_url;
          $("download").setAttribute("download", "");
        } else {
          $("download").hidden = true;
        }
        say("Delivered.", "ok");
        return;
      }
      await new Promise((ok) => setTimeout(ok, 250));
    }
    say("Paid; delivery is taking longer than usual. This page will show it when you reload.");
  }

  function listen() {
    const events = new EventSource(`/api/campaigns/${id}/events`);
    events.addEventListener("campaign", (e) => {
      campaign = JSON.parse(e.data);
      show();
      tick();
    });
  }

  async function start() {
    $("signin").addEventListener("submit", signIn);
    $("buy").addEventListener("click", buy);
    $("pay").addEventListener("click", pay);
    await syncClock();
    const r = await api("GET", `/api/campaigns/${id}`);
    if (r.status !== 200) {
      $("name").textContent = "No such sale";
      say("This sale does not exist, or has not been announced yet.", "error");
      return;
    }
    campaign = r.data;
    show();
    if (token) signedIn(localStorage.getItem("seckill.user") || "you");
    else $("signin").hidden = false;
    listen();
    setInterval(tick, 200);
    tick();
  }

  start();
})();
