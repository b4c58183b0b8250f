// faqsearch page: plain JavaScript over the service's JSON API (no build step, no CDN).
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
};
let index = null;

async function api(path, options = {}) {
  const res = await fetch(path, options);
  let body = null;
  try { body = await res.json(); } catch (e) { body = { error: res.statusText }; }
  if (!res.ok) throw new Error(body && body.error ? body.error : `HTTP ${res.status}`);
  return { body, headers: res.headers };
}
const base = () => `/indexes/${encodeURIComponent(index)}`;

function showError(target, err) {
  target.replaceChildren(el("p", { class: "error", text: err.message || String(err) }));
}

// ---- ask -------------------------------------------------------------------------------------
async function ask(event) {
  event.preventDefault();
  const out = $("#answers");
  const query = $("#ask-input").value.trim();
  if (!query) return;
  const payload = { query, k: 3 };
  if ($("#ask-mode").value) payload.mode = $("#ask-mode").value;
  try {
    const { body, headers } = await api(`${base()}/ask`, {
      method: "POST", headers: { "Content-Type": "application/json", "X-FAQSearch-Channel": "page" },
      body: JSON.stringify(payload),
    });
    renderResult(out, body, headers.get("X-Query-Id"));
  } catch (err) { showError(out, err); }
}

function renderResult(out, result, queryId) {
  out.replaceChildren();
  if (!result.answers.length) {
    const best = result.best_score === null ? "nothing matched" :
      `best score ${result.best_score.toFixed(3)} is below the threshold ${result.threshold.toFixed(2)}`;
    const box = el("div", { class: "no-answer" }, el("strong", { text: "No confident answer" }), ` (${best}).`);
    box.append(assignButton(result.query, queryId));
    out.append(box);
    return;
  }
  for (const a of result.answers) {
    out.append(el("div", { class: "answer" },
      el("div", { class: "head" },
        el("span", { class: "score", text: a.score.toFixed(3) }),
        el("span", { class: "faq-id", text: a.faq_id }),
        el("span", { class: "matched", text: `matched: ${a.question}` })),
      el("div", { class: "answer-text", text: a.answer })));
  }
}

// ---- feedback: a logged query becomes a question of an FAQ ----------------------------------
function assignButton(query, queryId) {
  const wrap = el("div");
  const open = el("button", { class: "assign-open", type: "button", text: "Assign to an FAQ…" });
  open.addEventListener("click", () => {
    open.hidden = true;
    const form = $("#assign-template").content.firstElementChild.cloneNode(true);
    const key = sessionStorage.getItem("faqsearch-key");
    if (key) $(".assign-key", form).value = key;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const status = $(".assign-status", form);
      const apiKey = $(".assign-key", form).value;
      if (!apiKey) { status.textContent = "Enter the API key the server was started with."; status.className = "assign-status error"; return; }
      try {
        await api(`${base()}/feedback`, {
          method: "POST", headers: { "Content-Type": "application/json", "X-API-Key": apiKey },
          body: JSON.stringify({ query, faq_id: $(".assign-faq", form).value.trim(), query_id: queryId ? Number(queryId) : null }),
        });
        sessionStorage.setItem("faqsearch-key", apiKey);
        status.textContent = `Added: "${query}" now leads to ${$(".assign-faq", form).value.trim()}.`;
        status.className = "assign-status ok";
      } catch (err) { status.textContent = err.message; status.className = "assign-status error"; }
    });
    wrap.append(form);
    loadFaqIds();
  });
  wrap.append(open);
  return wrap;
}

async function loadFaqIds() {
  try {
    const { body } = await api(`${base()}/faqs?limit=1000`);
    $("#faq-ids").replaceChildren(...body.faqs.map((f) => el("option", { value: f.id, text: f.answer.slice(0, 60) })));
  } catch (e) { /* the id can still be typed */ }
}

// ---- FAQs ------------------------------------------------------------------------------------
async function listFaqs(event) {
  if (event) event.preventDefault();
  const out = $("#faq-list");
  const q = $("#faq-search").value.trim();
  try {
    const { body } = await api(`${base()}/faqs?limit=200${q ? `&q=${encodeURIComponent(q)}` : ""}`);
    if (!body.faqs.length) { out.replaceChildren(el("p", { class: "muted", text: "No FAQ matches." })); return; }
    out.replaceChildren(...body.faqs.map((f) => {
      const item = el("div", { class: "faq" },
        el("div", { class: "head" }, el("span", { class: "faq-id", text: f.id }),
          el("span", { class: "badge", text: f.category || "no category" }),
          el("span", { class: "muted", text: `${f.questions} question${f.questions === 1 ? "" : "s"}` })),
        el("div", { class: "answer-text", text: f.answer }));
      item.addEventListener("click", () => showFaq(item, f.id), { once: true });
      return item;
    }));
  } catch (err) { showError(out, err); }
}

async function showFaq(item, id) {
  try {
    const { body } = await api(`${base()}/faqs/${encodeURIComponent(id)}`);
    item.append(el("ul", {}, ...body.questions.map((q) => el("li", { text: `${q.text} (${q.source})` }))));
  } catch (err) { item.append(el("p", { class: "error", text: err.message })); }
}

// ---- gaps and queries ------------------------------------------------------------------------
async function listGaps() {
  const out = $("#gap-list");
  try {
    const { body } = await api(`${base()}/gaps`);
    if (!body.gaps.length) { out.replaceChildren(el("p", { class: "muted", text: "No gaps yet: no group of unanswered queries is large enough." })); return; }
    out.replaceChildren(...body.gaps.map((g) => el("div", { class: "gap" },
      el("strong", { text: `${g.count} queries (${g.distinct} distinct)` }),
      g.nearest_faq ? el("span", { class: "muted", text: ` · nearest FAQ ${g.nearest_faq} at ${g.nearest_score.toFixed(2)}` }) : "",
      el("ul", {}, ...g.examples.map((ex) => el("li", {}, ex, assignButton(ex, null)))))));
  } catch (err) { showError(out, err); }
}

async function listQueries() {
  const out = $("#query-list");
  const only = $("#only-unanswered").checked;
  try {
    const { body } = await api(`${base()}/queries?limit=100${only ? "&unanswered=true" : ""}`);
    if (!body.queries.length) { out.replaceChildren(el("p", { class: "muted", text: "No logged queries." })); return; }
    out.replaceChildren(...body.queries.map((q) => el("div", { class: "query" },
      el("span", { class: "text", text: q.query }),
      el("span", { class: `badge ${q.answered ? "" : "unanswered"}`, text: q.answered ? `→ ${q.top_faq}` : "unanswered" }),
      el("span", { class: "score", text: q.score === null ? "–" : q.score.toFixed(3) }),
      el("span", { class: "muted", text: q.feedback_faq ? `assigned to ${q.feedback_faq}` : q.time.replace("T", " ").slice(0, 19) }),
      q.feedback_faq ? "" : assignButton(q.query, q.id))));
  } catch (err) { showError(out, err); }
}

// ---- tabs and start-up -----------------------------------------------------------------------
const loaders = { faqs: listFaqs, gaps: listGaps, queries: listQueries };
function selectTab(name) {
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".panel").forEach((p) => { p.hidden = p.id !== `panel-${name}`; });
  if (loaders[name]) loaders[name]();
}

async function start() {
  $("#ask-form").addEventListener("submit", ask);
  $("#faq-form").addEventListener("submit", listFaqs);
  $("#gaps-refresh").addEventListener("click", listGaps);
  $("#queries-refresh").addEventListener("click", listQueries);
  $("#only-unanswered").addEventListener("change", listQueries);
  document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => selectTab(b.dataset.tab)));
  try {
    const { body } = await api("/indexes");
    const select = $("#index-select");
    select.replaceChildren(...body.indexes.map((i) => el("option", { value: i.name, text: i.name })));
    const show = () => {
      index = select.value;
      const i = body.indexes.find((x) => x.name === index);
      $("#index-info").textContent = `${i.faqs} FAQs · ${i.questions} questions · ${i.encoder} · ${i.mode}` +
        (i.writable ? "" : " · read-only (no API key)");
    };
    select.addEventListener("change", show);
    show();
    document.body.dataset.ready = "1";
  } catch (err) { showError($("#answers"), err); }
}
start();
