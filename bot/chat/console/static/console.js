/* runbook-bot console: buttons by fetch, the live log (server-sent events), the live
   incident list. No framework, nothing from the internet; every page also works without
   this file (forms post and the server redirects back). */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function csrf() { return document.body.getAttribute("data-csrf") || ""; }
  function byId(id) { return document.getElementById(id); }

  // --- feedback where the finger is -----------------------------------------------------
  // The answer to a click goes in the .feedback slot of the block the pressed control is
  // in ([data-feedback-at]: #decision, #running, #incident-actions, ...), and stays there
  // when the card is refreshed under it; the slot showing it also answers to #flash.
  var lastFeedback = null;

  function blockOf(el) {
    var block = el && el.closest ? el.closest("[data-feedback-at]") : null;
    return block ? block.getAttribute("data-feedback-at") : "decision";
  }

  function slotFor(at) {
    var names = [at, "decision", "status-line"];
    for (var i = 0; i < names.length; i++) {
      var block = document.querySelector('[data-feedback-at="' + names[i] + '"]');
      var slot = block && block.querySelector(":scope > .feedback");
      if (slot) { return slot; }
    }
    return byId("flash");
  }

  function renderFeedback() {
    if (!lastFeedback) { return; }
    document.querySelectorAll(".feedback").forEach(function (el) {
      if (el.id === "flash") { el.removeAttribute("id"); }
      el.textContent = "";
      el.classList.add("empty");
      el.classList.remove("good", "bad");
    });
    var el = slotFor(lastFeedback.at);
    if (!el) { return; }
    el.id = "flash";
    el.textContent = lastFeedback.text;
    el.classList.remove("empty");
    el.classList.toggle("bad", !lastFeedback.ok);
    el.classList.toggle("good", !!lastFeedback.ok);
    var folded = el.closest("details");
    if (folded) { folded.open = true; }
    var box = el.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) {
      el.scrollIntoView({ block: "nearest" });
    }
  }

  function showFlash(text, ok, at) {
    lastFeedback = { text: text, ok: !!ok, at: at || "decision" };
    renderFeedback();
  }

  function fetchDoc(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        return html === null ? null : new DOMParser().parseFromString(html, "text/html");
      })
      // Offline, or the page is being left: keep what is shown; the next tick tries again.
      .catch(function () { return null; });
  }

  function replace(id, doc) {
    var fresh = doc && doc.getElementById(id);
    var old = byId(id);
    if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
  }

  // --- the card ------------------------------------------------------------------------
  var cardTimer = null;
  function writing() {
    var active = document.activeElement;
    var card = byId("card");
    var typing = card && active && card.contains(active) && /^(TEXTAREA|INPUT)$/.test(active.tagName);
    return Boolean(typing || (card && card.querySelector(".reveal.open")));
  }
  function refreshCard() {
    var timeline = byId("timeline");
    if (!timeline) { return; }
    if (writing()) {
      scheduleCard(2000); // a note or a disposition is being written: do not wipe it
      return;
    }
    fetchDoc(timeline.getAttribute("data-card")).then(function (doc) {
      if (!doc) { return; }
      // Asked again: a form may have opened while the card was on its way.
      if (writing()) { scheduleCard(2000); return; }
      var fresh = doc.body.querySelector("#card") || doc.getElementById("card");
      var old = byId("card");
      if (!fresh || !old) { return; }
      // What the person opened stays open: the folded steps, the node lists, the details.
      var opened = [];
      old.querySelectorAll("details[open]").forEach(function (d) {
        var step = d.closest("[data-step]");
        opened.push((d.id || d.className) + "@" + (step ? step.getAttribute("data-step") : ""));
      });
      var node = document.importNode(fresh, true);
      node.querySelectorAll("details").forEach(function (d) {
        var step = d.closest("[data-step]");
        var key = (d.id || d.className) + "@" + (step ? step.getAttribute("data-step") : "");
        if (opened.indexOf(key) >= 0) { d.open = true; }
      });
      old.replaceWith(node);
      renderFeedback();
    });
  }
  function scheduleCard(delay) {
    if (cardTimer) { clearTimeout(cardTimer); }
    cardTimer = setTimeout(function () { cardTimer = null; refreshCard(); }, delay);
  }

  // --- buttons -------------------------------------------------------------------------
  function send(form) {
    var at = blockOf(form);
    lastFeedback = null;
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(form.getAttribute("action"), {
      method: "POST",
      credentials: "same-origin",
      body: new URLSearchParams(new FormData(form)),
      headers: { "X-CSRF-Token": csrf(), Accept: "application/json" }
    })
      .then(function (r) {
        var type = r.headers.get("content-type") || "";
        if (type.indexOf("application/json") >= 0) { return r.json(); }
        return r.text().then(function (t) { return { ok: false, flash: t || ("HTTP " + r.status) }; });
      })
      .then(function (answer) {
        showFlash(answer.flash, answer.ok, at);
        if (answer.ok) {
          form.reset();
          form.classList.remove("open");
        }
        if (form.id === "followup-add" || form.closest("#followups")) {
          fetchDoc(window.location.pathname).then(function (doc) {
            var fresh = doc && doc.querySelector("#followups ul");
            var old = document.querySelector("#followups ul");
            if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
          });
        }
        refreshCard();
      })
      .catch(function () {
        showFlash("could not reach runbook-bot; check your connection and try again", false, at);
      })
      .then(function () { buttons.forEach(function (b) { b.disabled = false; }); });
  }

  function confirmed(form) {
    var field = form.querySelector("input[name=confirmed]");
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "confirmed";
      form.appendChild(field);
    }
    field.value = "1";
    send(form);
  }

  function confirmThen(form, button) {
    var dialog = byId("confirm");
    var targets = button.getAttribute("data-targets") || "(no targets named)";
    var title = button.getAttribute("data-title") || "this step";
    if (!dialog || typeof dialog.showModal !== "function") {
      if (window.confirm("Approve the disruptive step \"" + title + "\" on " + targets + "?")) { confirmed(form); }
      return;
    }
    byId("confirm-text").textContent = "Approve \"" + title + "\"?";
    byId("confirm-targets").textContent = targets;
    dialog.returnValue = "";
    dialog.onclose = function () {
      dialog.onclose = null;
      if (dialog.returnValue === "confirm") { confirmed(form); }
    };
    dialog.showModal();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("act")) { return; }
    event.preventDefault();
    var button = event.submitter || form.querySelector("button[type=submit]");
    if (button && button.getAttribute("data-action") === "approve" &&
        button.getAttribute("data-risk") === "disruptive") {
      confirmThen(form, button);
      return;
    }
    send(form);
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-reveal]") : null;
    if (!button) { return; }
    var target = byId(button.getAttribute("data-reveal"));
    if (!target) { return; }
    target.classList.toggle("open");
    var field = target.querySelector("textarea, input:not([type=hidden])");
    if (field && target.classList.contains("open")) { field.focus(); }
  });

  // --- the live log --------------------------------------------------------------------
  function logLine(data) {
    var li = document.createElement("li");
    li.setAttribute("data-seq", String(data.seq));
    var parts = [["time", data.time], ["actor", data.actor], ["type", data.type], ["summary", data.summary]];
    parts.forEach(function (part, i) {
      var el = document.createElement(part[0] === "time" ? "time" : "span");
      if (part[0] !== "time") { el.className = part[0]; }
      el.textContent = part[1];
      if (i) { li.appendChild(document.createTextNode(" ")); }
      li.appendChild(el);
    });
    return li;
  }

  var timeline = byId("timeline");
  if (timeline && window.EventSource) {
    var url = timeline.getAttribute("data-events") + "?after=" + (timeline.getAttribute("data-last") || "0");
    var source = new EventSource(url);
    source.addEventListener("log", function (event) {
      var data = JSON.parse(event.data);
      if (timeline.querySelector('li[data-seq="' + data.seq + '"]')) { return; }
      timeline.appendChild(logLine(data));
      timeline.setAttribute("data-last", String(data.seq));
      scheduleCard(300);
    });
  }

  // --- the live list -------------------------------------------------------------------
  var table = byId("incidents");
  if (table) {
    var every = parseInt(table.getAttribute("data-live") || "2000", 10);
    setInterval(function () {
      if (document.hidden) { return; }
      fetchDoc(window.location.href).then(function (doc) {
        if (!doc) { return; }
        var fresh = doc.querySelector("#incidents tbody");
        var old = document.querySelector("#incidents tbody");
        if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
        replace("paged", doc);
      });
    }, every);
  }
})();
