// VisualSparta search page: plain JS, no build step. Talks to POST /search and GET /images/{id}/similar.
"use strict";

const form = document.getElementById("search-form");
const input = document.getElementById("query");
const kSelect = document.getElementById("k");
const weightingSelect = document.getElementById("weighting");
const button = document.getElementById("search-button");
const statusBox = document.getElementById("status");
const grid = document.getElementById("results");
const context = document.getElementById("context");
const contextText = document.getElementById("context-text");
const contextWords = document.getElementById("context-words");
const contextImage = document.getElementById("context-image");
const backButton = document.getElementById("back-button");
const template = document.getElementById("card-template");
const wordNotes = document.getElementById("word-notes");

const MAX_RETRIES = 5;
let generation = 0; // a newer request makes older answers and pending retries obsolete

function setStatus(text, isError = false) {
  statusBox.textContent = text;
  statusBox.classList.toggle("error", isError);
}

function errorMessage(body, fallback) {
  if (!body || body.detail === undefined) return fallback;
  if (typeof body.detail === "string") return body.detail;
  if (Array.isArray(body.detail)) return body.detail.map((e) => e.msg).join("; ");
  return fallback;
}

async function callApi(url, options, gen, attempt = 0) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (err) {
    response = null; // network error: treat like 503
  }
  if (gen !== generation) return null;
  if (response === null || response.status === 503) {
    const retryAfter = response ? Number(response.headers.get("Retry-After")) || 5 : 5;
    if (attempt >= MAX_RETRIES) {
      setStatus("Search backend unavailable. Please try again later.", true);
      return null;
    }
    setStatus(`Search backend unavailable, retrying in ${retryAfter} s…`, true);
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    if (gen !== generation) return null;
    return callApi(url, options, gen, attempt + 1);
  }
  let body = null;
  try {
    body = await response.json();
  } catch (err) {
    body = null;
  }
  if (!response.ok) {
    const what = response.status === 404 ? "Not found" : response.status === 422 ? "Invalid query" : "Error";
    setStatus(`${what}: ${errorMessage(body, response.statusText)}`, true);
    return null;
  }
  return body;
}

// Matched words, not word-pieces: the API merges "bus" + "##es" into "buses" and leaves out
// punctuation (`words`); each chip's tooltip names the tokens behind it.
const MAX_CHIPS = 10; // "more like this" queries with ~32 terms: the strongest words say enough

function renderWords(list, words, maxC) {
  list.replaceChildren();
  if (!words || words.length === 0) return;
  for (const w of words.slice(0, MAX_CHIPS)) {
    const share = Math.min(1, w.contribution / maxC); // 0..1 relative to the strongest word on the page
    const li = document.createElement("li");
    li.className = "term";
    li.style.fontSize = `${(0.78 + 0.5 * share).toFixed(2)}rem`;
    li.style.background = `rgba(var(--chip), ${(0.12 + 0.6 * share).toFixed(2)})`;
    li.style.color = share > 0.7 ? "#fff" : "var(--ink)"; // keep contrast on light chips
    li.title = `contributes ${w.contribution.toFixed(3)} to the score (tokens: ${w.tokens.join(" ")})`;
    li.setAttribute("aria-label", `${w.word}: contribution ${w.contribution.toFixed(2)}`);
    const word = document.createElement("span");
    word.textContent = w.word;
    const weight = document.createElement("span");
    weight.className = "w";
    weight.textContent = w.contribution.toFixed(2);
    li.append(word, weight);
    list.append(li);
  }
}

// Only what the page shows: a k=100 page need not carry every image's full metadata.
const FIELDS = ["metadata.caption", "metadata.captions", "image_url", "thumbnail_url"];
let lastTextQuery = ""; // what "Back to text search" returns to

function captionOf(image) {
  const m = image.metadata || {};
  return m.caption || (m.captions || [])[0] || "";
}

// One line per query word that says something: held by no image, too common to rank, or (with no
// result) held too weakly. The counts are the engine's own (query_word_stats).
function sentence(parts) {
  const li = document.createElement("li");
  li.append(...parts.map((p) => (typeof p === "string" ? p : Object.assign(document.createElement("em"), p))));
  return li;
}

function renderWordNotes(body) {
  const notes = [];
  const indexed = body.indexed_images || 0;
  for (const w of body.query_word_stats || []) {
    const word = { textContent: w.word };
    if (w.images === 0 && w.partial) notes.push(sentence(["No image holds every piece of ", word, ` (${w.tokens.join(" ")}).`]));
    else if (w.images === 0) notes.push(sentence(["No image has ", word, "."]));
    else if (w.common) {
      const where = w.images >= indexed ? "every image" : `${w.images.toLocaleString()} of the ${indexed.toLocaleString()} images`;
      notes.push(sentence([word, ` is in ${where} and does not rank.`]));
    } else if (!body.results.length && body.no_match && body.no_match.words.includes(w.word)) {
      notes.push(sentence([`The ${w.images.toLocaleString()} images that hold `, word, " hold it too weakly to count as a match."]));
    }
  }
  if (!body.results.length && body.no_match && !notes.length) notes.push(sentence([body.no_match.reason]));
  wordNotes.replaceChildren(...notes);
}

function renderResults(body, emptyText) {
  grid.replaceChildren();
  renderWordNotes(body);
  if (!body.results.length) {
    setStatus(body.no_match ? `No match for “${lastTextQuery}”.` : emptyText);
    return;
  }
  // One scale for the whole page, so chips compare across results (like the paper's Figure 3).
  const contributions = body.results.flatMap((r) => (r.words || []).map((w) => w.contribution));
  const maxC = Math.max(...contributions, 1e-9);
  body.results.forEach((r, i) => {
    const card = template.content.firstElementChild.cloneNode(true);
    card.dataset.id = r.id;
    const caption = captionOf(r);
    const img = card.querySelector(".thumb");
    if (r.thumbnail_url) {
      img.src = `${r.thumbnail_url}?size=256`;
      card.querySelector(".thumb-link").href = r.image_url;
    } else {
      card.querySelector(".thumb-link").removeAttribute("href");
    }
    img.alt = caption ? `Image ${r.id}: ${caption}` : `Image ${r.id}`;
    card.querySelector(".rank").textContent = `#${i + 1}`;
    card.querySelector(".doc-id").textContent = r.id;
    card.querySelector(".score").textContent = r.score.toFixed(3);
    card.querySelector(".caption").textContent = caption;
    renderWords(card.querySelector(".terms"), r.words, maxC);
    const more = card.querySelector(".more-like-this");
    more.setAttribute("aria-label", `More images like ${r.id}`);
    more.addEventListener("click", () => moreLikeThis(r.id));
    grid.append(card);
  });
  // Which query weights made the scores, and which reranker ordered them (GET /search/options).
  const weighting = body.query_weighting ? ` · words weighted by ${body.query_weighting}` : "";
  const reranker = body.reranker ? ` · ordered by ${body.reranker}` : "";
  setStatus(
    `${body.results.length} result${body.results.length === 1 ? "" : "s"} in ${body.took_ms.toFixed(1)} ms${weighting}${reranker}`,
  );
}

async function search(query) {
  const gen = ++generation;
  lastTextQuery = query;
  input.value = query;
  context.hidden = true;
  button.disabled = true;
  setStatus("Searching…");
  try {
    const body = await callApi(
      "/search",
      {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ query, k: Number(kSelect.value), explain: true, fields: FIELDS, ...weightingChoice() }),
      },
      gen,
    );
    if (body) renderResults(body, `No images matched “${query}”. Try other words.`);
    else if (gen === generation) grid.replaceChildren();
  } finally {
    if (gen === generation) button.disabled = false;
  }
}

async function moreLikeThis(id) {
  const gen = ++generation;
  setStatus(`Finding images like ${id}…`);
  const fields = FIELDS.map((f) => `&fields=${encodeURIComponent(f)}`).join("");
  const url = `/images/${encodeURIComponent(id)}/similar?k=${Number(kSelect.value)}&explain=true${fields}`;
  const body = await callApi(url, {}, gen);
  if (!body) return;
  input.value = ""; // the results no longer answer the text in the box
  showSimilarTo(body.similar_to || { id }, body.query_words);
  renderResults(body, `No other images share words with ${id}.`);
  history.replaceState(null, "", `?like=${encodeURIComponent(id)}`);
  window.scrollTo({ top: 0, behavior: "smooth" });
}

// "Images like [thumbnail] caption", and the words the similarity is built from.
function showSimilarTo(image, words) {
  const caption = captionOf(image);
  contextImage.hidden = !image.thumbnail_url;
  if (image.thumbnail_url) {
    contextImage.src = `${image.thumbnail_url}?size=128`;
    contextImage.alt = caption ? `Image ${image.id}: ${caption}` : `Image ${image.id}`;
  }
  contextText.textContent = caption ? `Images like ${image.id}: “${caption}”` : `Images like ${image.id}`;
  contextWords.textContent = words && words.length ? `Similar in: ${words.slice(0, 8).join(", ")}` : "";
  backButton.hidden = !lastTextQuery;
  context.hidden = false;
}

// The weightings a search may ask for come from the service's registries, never from this file.
function weightingChoice() {
  return weightingSelect.value ? { query_weighting: weightingSelect.value } : {};
}

async function loadOptions() {
  let options = null;
  try {
    const response = await fetch("/search/options");
    options = response.ok ? await response.json() : null;
  } catch (err) {
    options = null;
  }
  if (!options) {
    weightingSelect.hidden = true; // the service's own weighting applies
    return;
  }
  weightingSelect.replaceChildren(
    ...options.query_weightings.map((w) => {
      const option = new Option(w.name, w.name, false, w.name === options.default_query_weighting);
      option.title = w.description;
      return option;
    }),
  );
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const query = input.value.trim();
  if (!query) {
    setStatus("Type a few words describing the image.", true);
    return;
  }
  history.replaceState(null, "", `?q=${encodeURIComponent(query)}`);
  search(query);
});

backButton.addEventListener("click", () => {
  const query = lastTextQuery;
  if (query) search(query);
  else {
    context.hidden = true;
    grid.replaceChildren();
    setStatus("");
  }
});

// The first search waits for the options, so it runs with the weighting the select shows.
loadOptions().finally(() => {
  const params = new URLSearchParams(window.location.search);
  if (params.get("q")) {
    input.value = params.get("q");
    search(params.get("q"));
  } else if (params.get("like")) {
    moreLikeThis(params.get("like"));
  } else {
    setStatus("Type a description and press Search.");
  }
});
input.focus();
