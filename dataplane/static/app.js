// The campaign page: a countdown on the server's clock, one purchase per click, the
// proof of work when the campaign asks for it, the waiting room when it has one,
// payment, and the content once delivered.
"use strict";
(() => {
  const id = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
  const $ = (name) => document.getElementById(name);
  let offset = 0; // the server's clock minus this one, in ms
  let campaign = null;
  let token = handedOver() || sessionStorage.getItem("seckill.token");
  let sending = false; // a purchase is on its way: no second one
  let owned = false; // a unit is held or bought
  let waitUntil = 0; // after a refusal with Retry-After
  let attempt = null; // this purchase's Idempotency-Key, kept until a definite answer
  let room = null; // the shopper's last answer from the waiting room (join or look)
  let joining = false;
  let looking = false;
  let seen = ""; // the standing in the waiting room the page last acted on
  let lookAt = Infinity; // when the next look at the waiting room is due, on this clock

  // A shop hands its shopper over with their token in the address's fragment
  // (`/c/{id}#token=…`), which no request carries: the page keeps it in this tab's
  // storage and takes it out of the address bar, so history, bookmarks and a link the
  // shopper shares do not carry it.
  function handedOver() {
    const given = new URLSearchParams(location.hash.slice(1)).get("token");
    if (!given) return null;
    sessionStorage.setItem("seckill.token", given);
    sessionStorage.removeItem("seckill.user");
    history.replaceState(null, "", location.pathname + location.search);
    return given;
  }

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

  // hh:mm:ss of a span of time, rounded up to the second.
  function hms(ms) {
    const s = Math.max(0, Math.ceil(ms / 1000));
    const hh = String(Math.floor(s / 3600)).padStart(2, "0");
    const mm = String(Math.floor(s / 60) % 60).padStart(2, "0");
    const ss = String(s % 60).padStart(2, "0");
    return hh + ":" + mm + ":" + ss;
  }

  function tick() {
    if (!campaign) return;
    if (campaign.starts_at_ms && Math.abs(now() - campaign.starts_at_ms) < 300) show();
    const t = now();
    const start = campaign.starts_at_ms;
    let text = "";
    if (start && t < start && (campaign.state === "armed" || campaign.state === "live")) {
      text = "Opens in " + hms(start - t);
    } else if (campaign.state === "armed") {
      text = "Opens when the shop starts the sale";
    }
    $("countdown").textContent = text;
    const passless = Boolean(campaign.queue) && standing() !== "admitted";
    $("buy").disabled = !token || sending || owned || t < waitUntil || !open() || passless;
    roomTick();
  }

  // The waiting room, for a campaign that has one. The event stream brings the room's
  // progress (`campaign.queue`: drawn, admitted, sold out), newer news than the
  // shopper's last answer, so the page reads the one against the other and looks again
  // only when the stream says there is news for this shopper (the draw, their turn), or
  // slowly in case the stream is lost. A look that brings the receipt of the last
  // answer is answered by the node without Redis.
  const RECEIPT = "seckill.receipt." + id;
  const SLOW_LOOK_MS = 12000;

  // Where the shopper stands: "" (signed out), unknown (not looked yet), not_joined,
  // pre (before the draw), drawn (place not learnt yet), waiting, called (let through,
  // pass not fetched yet), admitted, expired, used, sold_out or ended.
  function standing() {
    const q = campaign && campaign.queue;
    if (!q || !token) return "";
    if (!room) return "unknown";
    if (room.state === "admitted" && owned) return "used";
    if (room.state === "ended" || campaign.state === "ended") return "ended";
    if (room.state === "admitted") return now() < room.ticket_expires_at_ms ? "admitted" : "expired";
    if (room.state === "not_joined") return "not_joined";
    if (q.sold_out) return "sold_out";
    if (!room.place) return q.drawn ? "drawn" : "pre";
    return q.admitted >= room.place ? "called" : "waiting";
  }

  // When to look next, at a standing just reached (`news`) or just looked at again.
  function schedule(s, news) {
    const t = Date.now();
    if (s === "unknown" || s === "called") lookAt = news ? t : t + 1000;
    // The whole pre-queue learns its places at the draw: each shopper looks some time
    // before their turn, which the public seed lets the page estimate.
    else if (s === "drawn" && news) {
      lookAt = t + 2000 + Math.random() * 2000;
      drawnLook().then((at) => { lookAt = at; tick(); }, () => {});
    } else if (s === "drawn") lookAt = t + 1000;
    else if (s === "pre" || s === "waiting") lookAt = t + SLOW_LOOK_MS;
    else lookAt = Infinity;
  }

  // When to look after the draw: the shopper's draw is the first 52 bits of
  // SHA-1(seed ":" user), and their place near that fraction of the pre-queue, give or
  // take its square root. Looking well within the estimated wait spreads the whole
  // pre-queue's looks over the line's progress instead of the draw's first second.
  async function drawnLook() {
    const q = campaign.queue;
    if (!q.seed || !q.pre) return Date.now() + Math.random() * 2000;
    const b64 = atob(token.split(".")[0].replace(/-/g, "+").replace(/_/g, "/"));
    const user = Uint8Array.from(b64, (c) => c.charCodeAt(0));
    const text = new Uint8Array([...new TextEncoder().encode(q.seed + ":"), ...user]);
    const h = new Uint8Array(await crypto.subtle.digest("SHA-1", text));
    let draw = 0;
    for (let i = 0; i < 7; i++) draw = draw * 256 + h[i];
    const place = (Math.floor(draw / 16) / 2 ** 52) * q.pre;
    const ahead = Math.max(0, place - Math.sqrt(q.pre) * 3 - q.admitted);
    const waitMs = (ahead / Math.max(1, q.admit_per_s)) * 1000;
    return Date.now() + Math.random() * 2000 + Math.min(waitMs, 120000) * (0.5 + Math.random() * 0.3);
  }

  function learn(answer) {
    room = answer;
    if (answer.receipt) localStorage.setItem(RECEIPT, answer.receipt);
    // The look is news of the room as well, until the stream's next event.
    if (answer.state === "sold_out") campaign.queue.sold_out = true;
  }

  async function look() {
    looking = true;
    let wait = 0;
    try {
      const receipt = localStorage.getItem(RECEIPT);
      const headers = receipt ? { "Queue-Receipt": receipt } : {};
      const r = await api("GET", `/api/campaigns/${id}/queue`, undefined, headers);
      if (r.status === 200) learn(r.data);
      else if (r.data.error === "unauthenticated") refused(r);
      wait = r.retryAfter * 1000;
    } catch (_) {
      // the network failed: the next look tries again
    }
    looking = false;
    seen = standing();
    schedule(seen, false);
    lookAt = Math.max(lookAt, Date.now() + wait);
    tick();
  }

  async function join() {
    if (joining || !token) return;
    joining = true;
    tick();
    try {
      const body = {};
      // With proof of work as well, the work is the price of a place in line.
      if (campaign.require_ticket) {
        const t = await ticket();
        if (t.refusal) return refused(t.refusal);
        body.ticket = t.ticket;
      }
      const r = await api("POST", `/api/campaigns/${id}/queue`, body);
      if (r.status !== 200) return refused(r);
      learn(r.data);
      say("");
    } catch (_) {
      say("The network failed. Try again.", "error");
    } finally {
      joining = false;
      tick();
    }
  }

  // A wait in words, rounded as loosely as an estimate deserves.
  function estimate(ms) {
    const s = Math.round(ms / 1000);
    if (s < 1) return "any moment now";
    if (s < 90) return "about " + s + " s";
    if (s < 5400) return "about " + Math.round(s / 60) + " min";
    return "about " + Math.round(s / 3600) + " h";
  }

  const ROOM = {
    "": ["This sale has a waiting room: sign in to join it.", ""],
    unknown: ["This sale has a waiting room: join it for your turn to buy.", ""],
    not_joined: ["This sale has a waiting room: join it for your turn to buy.", ""],
    pre: ["You are in the pre-queue; places are drawn at the opening.", ""],
    drawn: ["The places are drawn. Finding yours…", ""],
    called: ["Your turn has come. Fetching your pass…", "ok"],
    admitted: ["Your turn has come: buy before your pass runs out.", "ok"],
    expired: ["Your turn has passed: your pass ran out before you bought.", "error"],
    used: ["You have had your turn.", ""],
    sold_out: ["Sold out: every unit went to shoppers ahead of you in line.", "error"],
    ended: ["The sale has ended.", "error"],
  };

  function showRoom(s) {
    const q = campaign.queue;
    $("room").hidden = !q;
    if (!q) return;
    const place = room && room.place;
    const position = place ? Math.max(1, place - q.admitted) : 0;
    const [said, kind] = ROOM[s] || ["", ""];
    let text = said;
    let eta = "";
    if (s === "waiting") {
      text = "Place " + place + " in line: ";
      text += position === 1 ? "you are next." : (position - 1) + " ahead of you.";
      eta = campaign.state === "paused"
        ? "The line moves on when the sale resumes."
        : "Estimated wait: " + estimate(((position - 1) * 1000) / Math.max(1, q.admit_per_s));
    }
    $("room-status").textContent = text;
    $("room-status").className = "room-status " + kind;
    $("room-eta").textContent = eta;
    $("room-eta").hidden = !eta;
    $("room-bar").hidden = s !== "waiting" && s !== "called";
    $("room-fill").style.width = (place ? Math.min(1, q.admitted / place) * 100 : 0).toFixed(1) + "%";
    $("join").hidden = s !== "" && s !== "unknown" && s !== "not_joined";
    $("join").disabled = !token || joining || campaign.state === "ended";
    $("pass").hidden = s !== "admitted";
    if (s === "admitted") {
      $("pass").textContent = "Buy within " + hms(room.ticket_expires_at_ms - now()).replace(/^00:/, "");
    }
    // The Buy button is for the shopper's turn; a refusal may have hidden it since.
    if (s === "admitted") $("buy").hidden = false;
    else if (s !== "expired" && s !== "used") $("buy").hidden = true;
  }

  function roomTick() {
    const s = standing();
    if (s !== seen) {
      seen = s;
      schedule(s, true);
    }
    if (!looking && Date.now() >= lookAt) look();
    showRoom(s);
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
      sessionStorage.setItem("seckill.token", token);
      sessionStorage.setItem("seckill.user", user);
      room = null;
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
    const pass = code === "ticket_invalid" && room && room.state === "admitted";
    const text = pass ? "Your pass was not accepted: it ran out or was used." : REFUSALS[code];
    say(text || r.data.message || "Something went wrong.", "error");
    if (code === "unauthenticated") {
      token = null;
      room = null;
      sessionStorage.removeItem("seckill.token");
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
    if (campaign.queue && standing() !== "admitted") return;
    sending = true;
    tick();
    try {
      let body = { quantity: 1 };
      if (campaign.queue) {
        body.ticket = room.ticket;
      } else if (campaign.require_ticket) {
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
    $("join").addEventListener("click", join);
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
    if (token) signedIn(sessionStorage.getItem("seckill.user") || "you");
    else $("signin").hidden = false;
    listen();
    setInterval(tick, 200);
    tick();
  }

  start();
})();
