// faqsearch page: plain JavaScript over the service's JSON API (no build step, no CDN).
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  // text and text boxes take the direction of what they hold: Arabic or Hebrew reads right to left
  if ("text" in attrs || tag === "textarea" || (tag === "input" && !["password", "checkbox"].includes(attrs.type))) {
    node.dir = "auto";
  }
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
};
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const KEY = "faqsearch-key"; // the key (read key or API key), remembered for this browser tab only

let index = null; // the selected index's name
let writable = false; // whether the server takes writes (started with an API key)
let access = { ask: "open", read: "open", write: "off" }; // what needs a key here (GET /health)

// A call to the API. Reads and asks send the remembered key (a server with a key shows FAQs, queries
// and gaps to its keys only); a write form sends its own. A 401 on a read opens the key form.
async function api(path, options = {}) {
  const key = sessionStorage.getItem(KEY);
  const write = Boolean(options.headers && options.headers["X-API-Key"]);
  const headers = { ...(options.headers || {}), ...(key && !write ? { "X-API-Key": key } : {}) };
  let res;
  try {
    res = await fetch(path, { ...options, headers });
  } catch (e) { // the browser's own "Failed to fetch": no answer at all
    throw new Error("The server cannot be reached (stopped, restarting or offline): try again in a moment.");
  }
  let body = null;
  try { body = await res.json(); } catch (e) { body = { error: res.statusText }; }
  if (!res.ok) {
    const err = new Error(body && body.error ? body.error : `HTTP ${res.status}`);
    err.status = res.status;
    err.needsKey = res.status === 401 && !write;
    if (err.needsKey) $("#key-form").hidden = false;
    throw err;
  }
  return { body, headers: res.headers };
}
const base = () => `/indexes/${encodeURIComponent(index)}`;
const post = (path, key, payload) => api(`${base()}${path}`, {
  method: "POST", headers: { "Content-Type": "application/json", "X-API-Key": key }, body: JSON.stringify(payload),
});

function showError(target, err) {
  const text = err.needsKey ? "This needs the server's key: enter its read key or API key at the top of the page." :
    err.message || String(err);
  target.replaceChildren(el("p", { class: err.needsKey ? "error needs-key" : "error", text }));
}

// Fill `out` by `work(latest)`: marked aria-busy until every call on it has finished (screen readers
// and the tests wait for it). `latest()` tells a call whether it is still the newest on `out`, so a
// slower, older answer never overwrites a newer one (a tab opened and a search sent at once).
async function loading(out, work) {
  const seq = (out.loads = (out.loads || 0) + 1);
  out.pending = (out.pending || 0) + 1;
  out.setAttribute("aria-busy", "true");
  const latest = () => seq === out.loads;
  try { await work(latest); } catch (err) { if (latest()) showError(out, err); } finally {
    out.pending -= 1;
    if (!out.pending) out.removeAttribute("aria-busy");
  }
}

// ---- ask -------------------------------------------------------------------------------------
async function ask(event) {
  event.preventDefault();
  const out = $("#answers");
  const query = $("#ask-input").value.trim();
  if (!query) return;
  const payload = { query, k: 3 };
  if ($("#ask-mode").value) payload.mode = $("#ask-mode").value;
  await loading(out, async (latest) => {
    const { body, headers } = await api(`${base()}/ask`, {
      method: "POST", headers: { "Content-Type": "application/json", "X-FAQSearch-Channel": "page" },
      body: JSON.stringify(payload),
    });
    if (!latest()) return;
    renderResult(out, body, headers.get("X-Query-Id"));
  });
}

// A confidence as people read it: 0.8123 -> "81%" (below 1% and above 99% say so), as the CLI prints it.
function percent(p) {
  const v = 100 * p;
  return v < 1 ? "<1%" : v > 99 ? ">99%" : `${Math.round(v)}%`;
}

// A confidence and the bar the index answers at, with the decimals that tell them apart ("46.4%" and
// "46.45%", not "46%" and "46%"), as the CLI says them.
function percents(conf, bar) {
  if ((conf > 0.99 || conf < 0.01) && Math.abs(conf - bar) >= 0.01) return [percent(conf), percent(bar)]; // as the card
  for (let d = 0; d < 5; d++) {
    const a = (100 * conf).toFixed(d), b = (100 * bar).toFixed(d);
    if (a !== b) return [`${a}%`, `${b}%`];
  }
  return [`${percent(conf)}`, `${parseFloat((100 * bar).toFixed(4))}%`];
}

// The bot's decision on top: the answer it gives with its confidence, or "I don't know" with the
// nearest guess; the other answers below. Every answer has "Wrong answer? The right FAQ is...".
function renderResult(out, result, queryId) {
  const [top, ...rest] = result.answers;
  const decision = top ?
    el("section", { class: "decision answered" }, el("h2", { text: "The bot answers" }),
      el("p", { class: "why", text: whyAnswered(result, top) }), answerCard(top, result.query, queryId)) :
    el("section", { class: "decision no-answer" }, el("h2", { text: "The bot says: I don't know" }),
      el("p", { class: "why", text: whyNot(result) }),
      result.nearest ? answerCard(result.nearest, result.query, queryId, "nearest guess") : "",
      result.nearest ? "" : assignButton(result.query, queryId, "The right FAQ is…"));
  out.replaceChildren(decision);
  if (rest.length) {
    out.append(el("h2", { class: "others", text: `Other answers (${rest.length})` }),
      ...rest.map((a) => answerCard(a, result.query, queryId)));
  }
}

// Why the bot does not answer, in words: the operating point it answers at.
function whyNot(result) {
  const near = result.nearest;
  if (result.best_score === null) return "Nothing in the index matched.";
  if (result.min_confidence !== null && near && near.confidence !== null) {
    const [guess, bar] = percents(near.confidence, result.min_confidence);
    return `Its nearest guess is ${guess} sure; this index answers at ${bar} or more.`;
  }
  if (result.threshold === null) return "Nothing in the index matched its words.";  // lexical: no threshold
  return `The best score ${result.best_score.toFixed(3)} is below the threshold ${result.threshold.toFixed(2)}.`;
}

// Why it answers: how sure, against the bar the index answers at (its operating point, else its threshold).
function whyAnswered(result, top) {
  if (result.min_confidence !== null && top.confidence !== null) {
    const [sure, bar] = percents(top.confidence, result.min_confidence);
    return `${sure} sure; this index answers at ${bar} or more.`;
  }
  if (result.threshold === null) {  // lexical mode: BM25 scores, no threshold; any match answers
    return `BM25 score ${top.score.toFixed(3)}; by words alone the best match is the answer.`;
  }
  return `Score ${top.score.toFixed(3)}; this index answers at ${result.threshold.toFixed(2)} or more.`;
}

// One answer: the stored question that matched, the answer, how sure, the FAQ, and the feedback control.
function answerCard(a, query, queryId, label = "") {
  return el("article", { class: label ? "answer guess" : "answer" },
    el("div", { class: "head" },
      el("span", { class: "matched", text: a.question }),
      a.confidence === null ?
        el("span", { class: "score", title: "similarity of the query to the matched question",
          text: a.score.toFixed(3) }) :
        el("span", { class: "score", title: `confidence: the chance that this is the right answer ` +
          `(similarity of the query to the matched question ${a.score.toFixed(3)})`,
          text: `${percent(a.confidence)} sure` })),
    el("div", { class: "answer-text", text: a.answer }),
    el("div", { class: "meta" },
      label ? el("span", { class: "guess-label", text: label }) : "",
      el("span", { class: "faq-id", text: a.faq_id }),
      a.category ? el("span", { class: "badge", text: a.category }) : "",
      a.source !== "corpus" ? el("span", { class: "muted",
        text: `matched ${/^[aeiou]/.test(a.source) ? "an" : "a"} ${a.source} question` }) : "",
      // a user's phrasing is shown only to keys that read the query log (else its FAQ's own question stands in)
      assigned(a.source) && a.question !== a.faq_question ?
        unassignButton(a.question, a.faq_id, `Take this question out of ${a.faq_id}`) : ""),
    assignButton(query, queryId, label ? "Not this one? The right FAQ is…" : "Wrong answer? The right FAQ is…"));
}

// ---- writes: a small inline form that takes the API key (remembered for the tab) ---------------
// `send(key)` makes the call and returns the text to show on success.
function writeForm(cls, submitText, fields, send) {
  const key = el("input", { class: `${cls}-key`, type: "password", placeholder: "API key", autocomplete: "off",
    "aria-label": "API key" });
  key.value = sessionStorage.getItem(KEY) || "";
  const status = el("span", { class: `${cls}-status`, role: "status" });
  const form = el("form", { class: `write-form ${cls}-form` }, ...fields, key,
    el("button", { type: "submit", class: `${cls}-submit`, text: submitText }), status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const say = (ok, text) => { status.textContent = text; status.className = `${cls}-status ${ok ? "ok" : "error"}`; };
    if (!key.value) { say(false, "Enter the API key the server was started with."); return; }
    try {
      const shown = await send(key.value);
      sessionStorage.setItem(KEY, key.value);
      form.classList.add("done"); // done once: its fields and button go, the message stays
      say(true, shown);
    } catch (err) { say(false, plainly(err)); }
  });
  return form;
}

// A refusal in an agent's words where the server's names a header, a command or a field path.
function plainly(err) {
  const m = err.message || String(err);
  if (err.status === 401) return "Wrong API key: enter the key the server was started with.";
  if (err.status === 409 && m.includes("already in the index")) {
    return "An FAQ with this id exists already: choose another id, or open that FAQ and edit it.";
  }
  if (err.status === 422 && m.includes("questions") && m.includes("at least 1")) {
    return "Give at least one question, one per line.";
  }
  return m;
}

// "This query should have matched FAQ X": the query becomes a question of X (feedback). X is picked
// by its question (the list follows what is typed) or typed as its id.
function assignButton(query, queryId, label = "Assign to an FAQ…") {
  if (!writable) return "";
  const wrap = el("div", { class: "assign" });
  const open = el("button", { class: "assign-open secondary small", type: "button", text: label });
  open.addEventListener("click", () => {
    open.hidden = true;
    wrap.classList.add("open");
    const faq = el("input", { class: "assign-faq", type: "search", list: "faq-ids", required: "",
      placeholder: "the right FAQ: type its question or id", "aria-label": "the right FAQ (its question or id)" });
    faq.addEventListener("input", () => findFaqs(faq.value));
    let undo = null; // next to the form, not in it: forms do not nest
    wrap.append(writeForm("assign", "Add the query to this FAQ", [faq], async (key) => {
      const faqId = await pickedFaq(faq.value, key);
      await post("/feedback", key, { query, faq_id: faqId, query_id: queryId ? Number(queryId) : null });
      const next = unassignButton(query, faqId, "Undo");
      if (undo) undo.replaceWith(next); else wrap.append(next);
      undo = next;
      return `Added: "${query}" now leads to ${faqTitle(faqId)}.`;
    }));
    findFaqs("");
  });
  wrap.append(open);
  return wrap;
}

// Undo feedback: the query is taken out of the FAQ again. One click when the key is remembered.
const assigned = (source) => source === "feedback" || source === "approved"; // the questions unassign takes out
function unassignButton(query, faqId, label = "Unassign", done = null) {
  if (!writable) return "";
  const wrap = el("span", { class: "unassign" });
  const open = el("button", { class: "unassign-open secondary small", type: "button", text: label,
    title: `take "${query}" out of ${faqId}` });
  open.addEventListener("click", () => {
    open.hidden = true;
    const form = writeForm("unassign", `Unassign from ${faqId}`, [], async (key) => {
      await post("/unassign", key, { query, faq_id: faqId });
      if (done) done();
      const back = el("button", { class: "unassign-undo secondary small", type: "button", text: "Undo" });
      back.addEventListener("click", async () => { // the question goes back into the FAQ (as feedback does)
        try {
          await post("/feedback", key, { query, faq_id: faqId });
          back.replaceWith(el("span", { class: "ok", text: ` Back in ${faqId}.` }));
        } catch (err) { back.replaceWith(el("span", { class: "error", text: ` ${err.message}` })); }
      });
      wrap.append(" ", back);
      return `Unassigned: "${query}" is no longer a question of ${faqId}.`;
    });
    wrap.append(form);
    // one click only to undo an assign just made; elsewhere a second click confirms (it removes a question)
    if (label === "Undo" && sessionStorage.getItem(KEY)) form.requestSubmit();
  });
  wrap.append(open);
  return wrap;
}

// FAQs by their first question: the picker's list (#faq-ids) follows what is typed, and the titles
// seen so far turn an id into words.
const titles = new Map(); // FAQ id -> its first question
const faqTitle = (id) => (titles.has(id) ? `"${titles.get(id)}" (${id})` : id);
let finding = 0;
let titled = null; // the index whose titles are loaded
async function loadTitles() { // once per index: the titles of its first 1,000 FAQs
  if (titled === index) return;
  const { body } = await api(`${base()}/faqs?limit=1000`);
  body.faqs.forEach((f) => titles.set(f.id, f.question));
  titled = index;
}
async function findFaqs(text) {
  const seq = ++finding;
  try {
    const q = text.trim();
    const { body } = await api(`${base()}/faqs?limit=20${q ? `&q=${encodeURIComponent(q)}` : ""}`);
    if (seq !== finding) return;
    body.faqs.forEach((f) => titles.set(f.id, f.question));
    $("#faq-ids").replaceChildren(...body.faqs.map((f) => el("option", { value: f.question, label: f.id })));
  } catch (e) { /* the id can still be typed */ }
}

// The FAQ the picker names: an id, or one of the questions listed for it (looked up with the form's key).
async function pickedFaq(text, key) {
  const t = text.trim();
  if (titles.has(t)) return t;
  const byQuestion = [...titles].filter(([, q]) => q === t).map(([id]) => id);
  if (byQuestion.length === 1) return byQuestion[0];
  const { body } = await api(`${base()}/faqs?limit=2&q=${encodeURIComponent(t)}`, { headers: { "X-API-Key": key } });
  const exact = body.faqs.filter((f) => f.id === t || f.question === t);
  if (exact.length === 1) return exact[0].id;
  throw new Error("Pick the FAQ from the list (type part of its question) or type its id.");
}

// ---- FAQs: one card per FAQ, its first question as the title; open it for the rest -------------
async function listFaqs(event) {
  if (event) event.preventDefault();
  const out = $("#faq-list");
  const q = $("#faq-search").value.trim();
  await loading(out, async (latest) => {
    const { body } = await api(`${base()}/faqs?limit=200${q ? `&q=${encodeURIComponent(q)}` : ""}`);
    if (!latest()) return;
    if (!body.faqs.length) out.replaceChildren(el("p", { class: "muted", text: "No FAQ matches." }));
    else out.replaceChildren(...body.faqs.map(faqCard));
    more(out, body.total, body.faqs.length, "faq-more", "FAQs", async (offset) => {
      const next = (await api(`${base()}/faqs?limit=100&offset=${offset}${q ? `&q=${encodeURIComponent(q)}` : ""}`)).body;
      next.faqs.forEach((f) => titles.set(f.id, f.question));
      return next.faqs.map(faqCard);
    });
    body.faqs.forEach((f) => titles.set(f.id, f.question));
  });
}

function faqCard(f) {
  const matched = f.matched && f.matched !== f.question;
  const card = el("details", { class: "faq", "data-id": f.id },
    el("summary", {},
      el("span", { class: "faq-question", text: f.question }),
      matched ? el("span", { class: "faq-matched muted", text: `matched: ${f.matched}` }) : "",
      el("span", { class: "faq-answer", text: f.answer }),
      el("span", { class: "meta" },
        el("span", { class: "faq-id", text: f.id }),
        Object.assign(el("span", { class: "badge faq-category", text: f.category || "" }), { hidden: !f.category }),
        el("span", { class: "muted faq-count", text: plural(f.questions, "question") }),
        f.score === undefined ? "" : f.confidence !== null && f.confidence !== undefined ?
          el("span", { class: "score", title: `how sure the index is that this FAQ answers the search (similarity ` +
            `${f.score.toFixed(3)})`, text: `${percent(f.confidence)} sure` }) :
          el("span", { class: "score", title: "similarity to the search", text: f.score.toFixed(3) }))));
  card.addEventListener("toggle", () => { if (card.open && !card.dataset.loaded) showFaq(card, f.id); });
  return card;
}

async function showFaq(card, id) {
  card.dataset.loaded = "1";
  try {
    const { body } = await api(`${base()}/faqs/${encodeURIComponent(id)}`);
    const questions = el("ul", { class: "questions" }, ...body.questions.map((q) => questionItem(q, id)));
    card.append(el("div", { class: "faq-body" }, el("div", { class: "answer-text", text: body.answer }),
      el("h3", { text: plural(body.questions.length, "question") }), questions, suggestBox(id, questions),
      editButton(card, body), removeButton(card, body)));
  } catch (err) { card.append(el("p", { class: "error", text: err.message })); }
}

// ---- create and edit an FAQ: its questions one per line, its answer, its category (API key) ------
function faqForm(faq, send) {
  const field = (label, node) => el("label", { class: "field" }, el("span", { text: label }), node);
  const id = el("input", { class: "faq-field-id", required: "", maxlength: "200", placeholder: "e.g. ship-12" });
  const questions = el("textarea", { class: "faq-field-questions", rows: "4", required: "",
    placeholder: "How long does delivery take?\nWhen will my parcel arrive?" });
  const answer = el("textarea", { class: "faq-field-answer", rows: "4", required: "" });
  const category = el("input", { class: "faq-field-category", maxlength: "200", placeholder: "optional" });
  if (faq) {
    id.value = faq.id;
    id.readOnly = true;
    questions.value = faq.questions.map((q) => q.text).join("\n");
    answer.value = faq.answer;
    category.value = faq.category || "";
  }
  const read = () => ({ id: id.value.trim(), answer: answer.value.trim(), category: category.value.trim() || null,
    questions: questions.value.split("\n").map((q) => q.trim()).filter(Boolean),
    metadata: faq ? faq.metadata || {} : {} });
  const form = writeForm(faq ? "faq-edit" : "faq-create", faq ? "Save" : "Create FAQ", [el("div", { class: "fields" },
    field("Id", id), field("Questions, one per line", questions), field("Answer", answer),
    field("Category", category))], (key) => send(key, read()));
  form.classList.add("faq-editor");
  return form;
}

// "New FAQ" above the list: the FAQ is added, then listed by its question.
function newFaq() {
  const box = $("#faq-editor");
  if (box.firstChild && !box.firstChild.classList.contains("done")) { box.replaceChildren(); return; } // closes it
  box.replaceChildren(faqForm(null, async (key, f) => {
    await post("/faqs", key, { faqs: [f] });
    titles.set(f.id, f.questions[0]);
    $("#faq-search").value = f.id;
    listFaqs();
    refreshInfo();
    return `Created ${faqTitle(f.id)}.`;
  }));
}

// "Edit" in an opened FAQ: the form holds all its questions as they are now (read again on "Edit");
// saving replaces the FAQ with what it holds, unless it changed since (If-Match: a 412 says so, and
// nothing added meanwhile, an approval or feedback, is dropped).
function editButton(card, faq) {
  if (!writable) return "";
  const wrap = el("div", { class: "edit" });
  const open = el("button", { class: "faq-edit-open secondary small", type: "button", text: "Edit" });
  let draft = null; // a form the server refused as changed meanwhile: {base: the FAQ it was read from, mine: typed}
  open.addEventListener("click", async () => {
    open.hidden = true;
    let fresh = faq;
    try {
      fresh = (await api(`${base()}/faqs/${encodeURIComponent(faq.id)}`)).body;
    } catch (err) { // the form refused before stays, its typed text too
      open.hidden = false;
      wrap.append(el("p", { class: "error", text: err.status === 404 ? "This FAQ was removed meanwhile: copy your " +
        "text from the form, or create the FAQ again with New FAQ." : err.message || String(err) }));
      return;
    }
    wrap.querySelectorAll("form, p.error, .edit-changed").forEach((f) => f.remove()); // read afresh
    const form = faqForm(fresh, async (key, f) => {
      try {
        await api(`${base()}/faqs/${encodeURIComponent(faq.id)}`, { method: "PUT", body: JSON.stringify(f),
          headers: { "Content-Type": "application/json", "X-API-Key": key, "If-Match": `"${fresh.revision}"` } });
      } catch (err) { // changed meanwhile (412) or removed (404): nothing saved, the typed text kept
        if (err.status !== 412 && err.status !== 404) throw err; // (a field to mend: the form stays, sent again)
        open.hidden = false;
        open.textContent = "Edit again";
        if (err.status === 412) {
          draft = { base: fresh, mine: f };
          throw new Error("Someone changed this FAQ since you opened it, so nothing was saved. Press \u201cEdit " +
            "again\u201d: your text stays in the form, with what changed shown above it.");
        }
        if (err.status === 404) {
          open.hidden = true;
          throw new Error("This FAQ was removed meanwhile, so nothing was saved: copy your text, or create the FAQ " +
            "again with New FAQ.");
        }
        throw err;
      }
      draft = null;
      open.hidden = false;
      open.textContent = "Edit";
      const { body } = await api(`${base()}/faqs/${encodeURIComponent(faq.id)}`);
      $(".faq-question", card).textContent = body.questions[0].text;
      $(".faq-answer", card).textContent = body.answer;
      $(".faq-body > .answer-text", card).textContent = body.answer;
      $(".faq-body > h3", card).textContent = plural(body.questions.length, "question");
      $(".faq-count", card).textContent = plural(body.questions.length, "question"); // the summary too
      $(".faq-category", card).textContent = body.category || "";
      $(".faq-category", card).hidden = !body.category;
      $(".faq-body > .questions", card).replaceChildren(...body.questions.map((q) => questionItem(q, faq.id)));
      titles.set(faq.id, body.questions[0].text);
      refreshInfo();
      return "Saved: the index answers with it now.";
    });
    if (draft) { // the refused edit's changes over what the FAQ holds now, what changed meanwhile said above
      const merged = mergeEdit(draft.base, draft.mine, fresh);
      wrap.append(el("div", { class: "edit-changed" },
        el("p", { class: "muted", text: "Changed meanwhile. The FAQ holds now:" }),
        el("div", { class: "answer-text", text: fresh.answer }),
        el("p", { class: "muted", text: `Questions: ${fresh.questions.map((q) => q.text).join(" · ")}` }),
        el("p", { class: "muted", text: "The form below holds that with your changes made to it: check it, then Save." })));
      $(".faq-field-questions", form).value = merged.questions.join("\n");
      $(".faq-field-answer", form).value = merged.answer;
      $(".faq-field-category", form).value = merged.category || "";
      draft = null;
    }
    wrap.append(form);
    $(".faq-field-answer", form).focus(); // where an edit mostly goes (the id is read-only)
  });
  wrap.append(open);
  return wrap;
}

// "Remove" in an opened FAQ: after a second click, the FAQ and its questions go; "Undo" adds that FAQ back as
// it was read (restoring the version before the remove would also undo every edit made since, a colleague's
// or another Remove's Undo; History does that, saying so).
function removeButton(card, faq) {
  if (!writable) return "";
  const id = faq.id;
  const wrap = el("div", { class: "remove" });
  const open = el("button", { class: "faq-remove-open secondary small", type: "button", text: "Remove…" });
  open.addEventListener("click", () => {
    open.hidden = true;
    wrap.append(writeForm("faq-remove", `Remove ${id} and its questions`, [], async (key) => {
      faq = (await api(`${base()}/faqs/${encodeURIComponent(id)}`)).body; // as it is now: what Undo brings back
      const { body } = await api(`${base()}/faqs/${encodeURIComponent(id)}`,
        { method: "DELETE", headers: { "X-API-Key": key } });
      card.classList.add("gone");
      refreshInfo();
      const back = el("button", { class: "faq-remove-undo secondary small", type: "button", text: "Undo" });
      back.addEventListener("click", async () => {
        back.disabled = true;
        try {
          await post("/faqs", key, { faqs: [{ id, answer: faq.answer, category: faq.category || null,
            questions: faq.questions.map((q) => q.text), metadata: faq.metadata || {} }] });
          card.classList.remove("gone");
          refreshInfo();
          back.replaceWith(el("span", { class: "ok", text: ` ${id} is back.` }));
        } catch (err) { back.replaceWith(el("span", { class: "error", text: ` ${plainly(err)}` })); }
      });
      wrap.append(back);
      return `Removed ${id}` + (body.previous_version ? ` (History keeps the version before: ${body.previous_version}).` : ".");
    }));
  });
  wrap.append(open);
  return wrap;
}

// The versions the index keeps, newest first, each restorable (FAQs tab, "History").
async function history(again = false, said = "") {
  const box = $("#faq-editor");
  if (!again && box.firstChild && box.firstChild.classList.contains("history")) { box.replaceChildren(); return; }
  const out = el("div", { class: "history" });
  box.replaceChildren(out);
  await loading(out, async () => {
    const { body } = await api(`${base()}/versions`);
    out.replaceChildren(el("h2", { text: "Versions kept" }), said ? el("p", { class: "ok history-said", text: said }) : "",
      el("p", { class: "muted", text: "A remove, and a change of several FAQs at once (an upsert), keep the version " +
        "before them. Restoring one makes it live again as a new version; the live one is kept too, so a restore " +
        "is undone the same way. Edits made after that version are left behind." }),
      el("ul", { class: "versions" }, ...body.versions.slice().reverse().map((v) => {
        const made = v.edited_by ? `${v.made_by}, then ${(v.edits || [v.edited_by]).join(", ")}` : v.made_by;
        const li = el("li", { class: "version" }, el("strong", { text: v.version }),
          ` ${(v.time || "").replace("T", " ").slice(0, 16)} UTC · ${made || "?"} · ${plural(v.faqs, "FAQ")}, ` +
          `${plural(v.questions, "question")}`);
        li.append(" ", v.live ? el("span", { class: "badge", text: "live" }) :
          restoreButton(v.version, "Restore…", (said) => { listFaqs(); history(true, said); }));
        return li;
      })));
  });
}

function restoreButton(version, label = "Restore…", after = listFaqs) {
  if (!writable) return "";
  const wrap = el("span", { class: "restore" });
  const open = el("button", { class: "restore-open secondary small", type: "button", text: label });
  open.addEventListener("click", () => {
    open.hidden = true;
    wrap.append(writeForm("restore", `Make ${version} live again`, [], async (key) => {
      const { body } = await post("/restore", key, { version });
      const said = body.left_behind ? `Restored ${version}; undo with ${body.left_behind.undo} (History).` :
        `${version} is live already.`;
      after(said);
      refreshInfo();
      return said;
    }));
  });
  wrap.append(open);
  return wrap;
}

// Your edit (``mine``, made on ``base``) over the FAQ as it is now (``now``): the fields you changed take your
// value, the others keep theirs; the questions you added are added and those you deleted go, while those
// added meanwhile (feedback, an approval) stay.
function mergeEdit(base, mine, now) {
  const was = base.questions.map((q) => q.text);
  const deleted = new Set(was.filter((q) => !mine.questions.includes(q)));
  const questions = now.questions.map((q) => q.text).filter((q) => !deleted.has(q));
  for (const q of mine.questions) if (!was.includes(q) && !questions.includes(q)) questions.push(q);
  return { answer: mine.answer !== base.answer ? mine.answer : now.answer, questions,
    category: (mine.category || null) !== (base.category || null) ? mine.category : now.category };
}

function questionItem(q, id) {
  const li = el("li", {}, el("span", { class: "q-text", text: q.text }));
  if (q.source !== "corpus") li.append(" ", el("span", { class: `badge source-${q.source}`, text: q.source }));
  if (assigned(q.source)) li.append(" ", unassignButton(q.text, id, "Unassign", () => li.classList.add("gone")));
  return li;
}

// "Suggest phrasings": logged queries answered by this FAQ or near it; the ticked ones become its
// questions (source approved). Nothing is indexed before "Approve selected". Only with writes on.
function suggestBox(id, questions) {
  if (!writable) return "";
  const box = el("div", { class: "suggest" });
  const open = el("button", { class: "suggest-open secondary small", type: "button", text: "Suggest phrasings" });
  open.addEventListener("click", async () => {
    open.hidden = true;
    const out = el("div", { class: "suggest-list" });
    box.append(out);
    await loading(out, async () => {
      const { body } = await api(`${base()}/faqs/${encodeURIComponent(id)}/suggestions`);
      const notes = body.notes.map((n) => el("p", { class: "muted", text: n }));
      if (!body.suggestions.length) {
        const none = "No suggestions: no logged query was answered by this FAQ or near it.";
        out.replaceChildren(el("p", { class: "muted", text: none }), ...notes);
        return;
      }
      const rows = body.suggestions.map((sg) => el("li", { class: "suggestion" }, el("label", {},
        el("input", { type: "checkbox", class: "suggest-check", value: sg.text }), " ",
        el("span", { class: "q-text", text: sg.text }), " ",
        el("span", { class: `badge suggest-${sg.source}`, title: sg.source === "answered" ?
          "the index answers it with this FAQ now" : sg.source === "near" ?
          "the index leaves it unanswered, with this FAQ among the nearest" : "generated", text: sg.source }),
        sg.confidence === null || sg.confidence === undefined ? "" :
          el("span", { class: "muted", text: ` ${percent(sg.confidence)} sure` }),
        sg.count > 1 ? el("span", { class: "muted", text: ` asked ${sg.count}×` }) : "")));
      const approveForm = () => {
        const form = writeForm("approve", "Approve selected", [], async (key) => {
          const ticked = rows.filter((r) => r.isConnected && $(".suggest-check", r).checked);
          if (!ticked.length) throw new Error("Tick the phrasings to add first.");
          const texts = ticked.map((r) => $(".suggest-check", r).value);
          const { body: report } = await post(`/faqs/${encodeURIComponent(id)}/approve`, key, { texts });
          for (const r of ticked) r.remove();
          questions.append(...texts.map((text) => questionItem({ text, source: "approved" }, id)));
          const card = box.closest("details.faq"); // its counts follow, as after an edit
          const held = plural(questions.querySelectorAll("li:not(.gone)").length, "question");
          if (card) { $(".faq-body > h3", card).textContent = held; $(".faq-count", card).textContent = held; }
          if (rows.some((r) => r.isConnected)) form.after(approveForm()); // more to approve: a button for them
          refreshInfo();
          return `Added ${plural(report.added_questions, "question")} to ${id}.`;
        });
        return form;
      };
      out.replaceChildren(el("ul", { class: "suggestions" }, ...rows), approveForm(), ...notes);
    });
  });
  box.append(open);
  return box;
}

// ---- gaps and queries ------------------------------------------------------------------------
async function listGaps() {
  const out = $("#gap-list");
  await loading(out, async (latest) => {
    await loadTitles();
    const { body } = await api(`${base()}/gaps`);
    if (!latest()) return;
    if (!body.gaps.length) {
      out.replaceChildren(el("p", { class: "muted", text: "No gaps yet: no group of unanswered queries is large enough." }));
      return;
    }
    out.replaceChildren(...body.gaps.map((g) => el("div", { class: "gap" },
      el("strong", { text: `${g.count} queries (${g.distinct} distinct)` }),
      g.script ? el("span", { class: "muted", text: ` · written in ${g.script} script, which this index's encoder ` +
        "does not read: a multilingual index answers them" }) :
      g.nearest_faq ?
        el("span", { class: "muted", text: ` · nearest FAQ ${faqTitle(g.nearest_faq)} at ` + (g.nearest_confidence === null ?
          g.nearest_score.toFixed(2) : `${percent(g.nearest_confidence)} confidence`) }) : "",
      el("ul", {}, ...g.examples.map((ex) => el("li", {}, ex, assignButton(ex, null)))))));
  });
}

async function listQueries() {
  const out = $("#query-list");
  const only = $("#only-unanswered").checked;
  await loading(out, async (latest) => {
    await loadTitles();
    const { body } = await api(`${base()}/queries?limit=100${only ? "&unanswered=true" : ""}`);
    if (!latest()) return;
    if (!body.queries.length) out.replaceChildren(el("p", { class: "muted", text: "No logged queries." }));
    else out.replaceChildren(...body.queries.map(queryRow));
    more(out, only ? body.unanswered : body.total, body.queries.length, "query-more", "older queries",
      async (offset) => (await api(`${base()}/queries?limit=100&offset=${offset}${only ? "&unanswered=true" : ""}`))
        .body.queries.map(queryRow));
  });
}

// "Show N more" under a list cut at a page: the next page appended, then the button again while more are left.
function more(out, total, shown, cls, what, page) {
  if (total <= shown) return;
  const button = el("button", { class: `secondary small ${cls}`, type: "button",
    text: `Show ${Math.min(total - shown, 100)} ${what} more (${shown} of ${total} shown)` });
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const rows = await page(shown);
      if (!button.isConnected) return; // the list was rebuilt meanwhile (a new search): not this one's rows
      if (!rows.length) { button.remove(); return; }
      button.replaceWith(...rows);
      more(out, total, shown + rows.length, cls, what, page);
    } catch (err) { button.replaceWith(el("p", { class: "error", text: err.message })); }
  });
  out.append(button);
}

function queryRow(q) {
  const row = el("div", { class: "query" },
    el("span", { class: "text", text: q.query }),
    q.answered ? el("span", { class: "to-faq", text: `→ ${faqTitle(q.top_faq)}` }) :
      el("span", { class: "badge unanswered", text: "unanswered" }),
    !q.answered && q.top_faq ? el("span", { class: "muted nearest", text: `nearest ${faqTitle(q.top_faq)}` }) : "",
    q.confidence !== null && q.confidence !== undefined ? // what decided, as the Ask tab says it
      el("span", { class: "score", title: `similarity ${q.score === null ? "–" : q.score.toFixed(3)}`,
        text: `${percent(q.confidence)} sure` }) :
      el("span", { class: "score", title: "similarity (logged before confidences were)",
        text: q.score === null ? "–" : q.score.toFixed(3) }),
    el("span", { class: "muted time", text: q.feedback_faq ? `assigned to ${q.feedback_faq}` :
      `${q.time.replace("T", " ").slice(0, 16)} UTC` }));
  if (q.feedback_faq) {
    row.append(unassignButton(q.query, q.feedback_faq, "Unassign", () => {
      row.classList.add("gone");
      $(".time", row).textContent = `taken out of ${q.feedback_faq}`;
    }));
  } else {
    row.append(assignButton(q.query, q.id));
  }
  return row;
}

// ---- tabs and start-up -----------------------------------------------------------------------
const loaders = { faqs: listFaqs, gaps: listGaps, queries: listQueries };
function selectTab(name) {
  document.querySelectorAll("nav button").forEach((b) => {
    const on = b.dataset.tab === name;
    b.classList.toggle("active", on);
    b.setAttribute("aria-selected", String(on));
    b.tabIndex = on ? 0 : -1; // one stop in the tab order; the arrow keys move between tabs
  });
  document.querySelectorAll(".panel").forEach((p) => { p.hidden = p.id !== `panel-${name}`; });
  // back on a list with a form being filled in (an edit, a new FAQ): keep it as it is, unsaved text too
  if (document.querySelector(`#panel-${name} form.write-form:not(.done)`)) return;
  if (loaders[name]) loaders[name]();
}

// The index list: names from /health (always open), counts from /indexes where this page may read
// them. Without the key a server that has one asks for it; asking stays usable unless it is private.
// True when the counts could be read.
async function loadIndexes(names) {
  let details = null;
  if (access.read === "open" || sessionStorage.getItem(KEY)) {
    try {
      details = (await api("/indexes")).body.indexes;
    } catch (err) {
      if (!err.needsKey) throw err;
      sessionStorage.removeItem(KEY); // a key the server no longer takes
    }
  }
  $("#key-form").hidden = details !== null || (access.read === "open" && access.ask === "open");
  const select = $("#index-select");
  const before = select.value;
  select.replaceChildren(...names.map((name) => el("option", { value: name, text: name })));
  if (names.includes(before)) select.value = before;
  const show = () => {
    index = select.value;
    document.body.classList.toggle("read-only", !writable); // no write buttons where writes are refused
    $("#faq-new").hidden = !writable;
    $("#faq-history").hidden = access.read !== "open" && !sessionStorage.getItem(KEY);
    titles.clear();
    titled = null;
    $("#faq-editor").replaceChildren();
    showInfo(details && details.find((x) => x.name === index));
  };
  select.onchange = () => { show(); selectTab($("nav button.active").dataset.tab); };
  show();
  return details !== null;
}

// The header's line on the selected index: its counts, encoder and mode.
function showInfo(i) {
  const info = i ? `${i.faqs} FAQs · ${i.questions} questions · ${i.encoder} · ${i.mode}` : "";
  const readOnly = el("span", { class: "badge", text: "read-only" });
  $("#index-info").replaceChildren(info, ...(writable ? [] : [" ", readOnly]));
  $("#index-info").title = writable ? info : `${info} · read-only: started without an API key`;
}

// After an edit the page made: the header's counts read again (they said 213 FAQs beside a list of 214).
async function refreshInfo() {
  try {
    showInfo((await api("/indexes")).body.indexes.find((x) => x.name === index));
  } catch (e) { /* the counts stay as they were */ }
}

// The key form: the read key (or the API key) unlocks the FAQs, gaps and queries for this tab.
async function unlock(event) {
  event.preventDefault();
  const status = $("#key-status");
  const key = $("#key-input").value;
  if (!key) { status.textContent = "Enter the server's read key or API key."; return; }
  sessionStorage.setItem(KEY, key); // loadIndexes sends it, and forgets it if the server refuses it
  try {
    if (!(await loadIndexes([...$("#index-select").options].map((o) => o.value)))) {
      status.textContent = "Wrong key.";
      return;
    }
    status.textContent = "";
    $("#key-input").value = "";
    selectTab($("nav button.active").dataset.tab);
  } catch (err) { status.textContent = err.message; }
}

async function start() {
  $("#ask-form").addEventListener("submit", ask);
  $("#faq-form").addEventListener("submit", listFaqs);
  $("#faq-new").addEventListener("click", newFaq);
  $("#faq-history").addEventListener("click", () => history()); // (the click event is no `again`: it closes)
  $("#key-form").addEventListener("submit", unlock);
  $("#gaps-refresh").addEventListener("click", listGaps);
  $("#queries-refresh").addEventListener("click", listQueries);
  $("#only-unanswered").addEventListener("change", listQueries);
  const tabs = [...document.querySelectorAll("nav button")];
  tabs.forEach((b, i) => {
    b.addEventListener("click", () => selectTab(b.dataset.tab));
    b.addEventListener("keydown", (event) => { // the tab list's keys (WAI-ARIA): arrows, Home and End
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      const next = tabs[(to + tabs.length) % tabs.length];
      selectTab(next.dataset.tab);
      next.focus();
    });
  });
  try {
    const { body } = await api("/health");
    access = body.access || access;
    writable = access.write === "key"; // without an API key the server refuses writes
    await loadIndexes(body.indexes);
    document.body.dataset.ready = "1";
  } catch (err) { showError($("#answers"), err); }
}
start();
