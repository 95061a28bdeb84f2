#!/usr/bin/env node
// A reference agent in Node.js for the EffectBench agent protocol (docs/agent-protocol.md).
//
// It does what effectbench.arms.baselines.EffectVerifiedArm does, over the product's
// own HTTP API and nothing else: read the record back, submit the form once, read it
// back again, and claim success only when the declared effect (an insert clause or a
// state diff) holds in what the product reads back; on a reference-mode diff, whose
// expected changes it cannot see, only when the change is its own submission
// (effectbench/arms/own_change.py). The form and the readback are the `form_url` and
// `readback_url` channels when the product names them, else the MockMed anchor's
// routes. No npm packages: Node's built-in fetch and readline.
//
// One process serves many episodes at once: every message carries its episode id.
// It writes one JSON object per line on stdout; diagnostics go to stderr.

"use strict";

const readline = require("node:readline");

const NO_SCRIPT = "no scripted action: the task offers no solution or the provider no driver";
const BANNER = /<div id='banner' class='(saved|error)'>([^<]*)<\/div>/;
const running = new Map(); // episode id -> AbortController

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

// ------------------------------------------------------------------- the judge, ported
// The same rules as effectbench/judge.py. JSON in JavaScript cannot tell 1 from 1.0,
// so an integer-valued float counts as an integer here (MockMed stores neither).

function typeName(v) {
  if (v === null) return "null";
  if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
  return typeof v;
}

function sameValue(a, b) {
  return typeName(a) === typeName(b) && a === b;
}

function rowMatches(row, selector) {
  for (const [col, want] of Object.entries(selector)) {
    if (!(col in row) || !sameValue(row[col], want)) return false;
  }
  return true;
}

function scalarKey(v) {
  return typeName(v) + ":" + JSON.stringify(v);
}

function wholeRowKey(row) {
  return Object.keys(row).sort().map((c) => c + "=" + scalarKey(row[c])).join("\u0000");
}

function identity(row, idField) {
  return idField in row ? "id:" + scalarKey(row[idField]) : "row:" + wholeRowKey(row);
}

// Rows outside the selector with no counterpart, or whose counterpart differs.
function unpaired(rows, others, selector, idField) {
  const pool = new Map();
  for (const r of others) {
    const k = identity(r, idField);
    if (!pool.has(k)) pool.set(k, []);
    pool.get(k).push(wholeRowKey(r));
  }
  let missing = 0;
  let differing = 0;
  for (const r of rows) {
    if (selector !== null && rowMatches(r, selector)) continue;
    const candidates = pool.get(identity(r, idField));
    if (!candidates || candidates.length === 0) {
      missing += 1;
      continue;
    }
    const i = candidates.indexOf(wholeRowKey(r));
    if (i >= 0) candidates.splice(i, 1);
    else {
      candidates.pop();
      differing += 1;
    }
  }
  return { missing, differing };
}

function tableRows(snapshot, table) {
  return (snapshot.tables && snapshot.tables[table]) || [];
}

function judge(effect, pre, post) {
  const rw = effect.record_written;
  const idField = rw.id_field || "id";
  const expected = rw.expected_count ?? 1;
  if (!post.readable) return { state: "UNREADABLE", reasons: ["post-state unreadable: " + post.error] };
  const needsPre = rw.count_new_only || rw.forbid_collateral_loss || rw.forbid_stray_writes;
  if (!pre.readable && needsPre) return { state: "UNREADABLE", reasons: ["pre-state unreadable"] };

  let rows = tableRows(post, rw.table).filter((r) => rowMatches(r, rw.selector));
  if (rw.count_new_only) {
    const seen = new Map();
    for (const r of tableRows(pre, rw.table)) {
      const k = identity(r, idField);
      seen.set(k, (seen.get(k) || 0) + 1);
    }
    rows = rows.filter((r) => {
      const k = identity(r, idField);
      if (seen.get(k)) {
        seen.set(k, seen.get(k) - 1);
        return false;
      }
      return true;
    });
  }
  const side = [];
  if (rw.forbid_collateral_loss) {
    for (const table of Object.keys(pre.tables || {}).sort()) {
      const before = tableRows(pre, table);
      if (before.length === 0) continue;
      const sel = table === rw.table ? rw.selector : null;
      const { missing, differing } = unpaired(before, tableRows(post, table), sel, idField);
      if (missing) side.push(`collateral loss in ${table}: ${missing} row(s) vanished`);
      if (differing) side.push(`collateral loss in ${table}: ${differing} row(s) overwritten`);
    }
  }
  if (rw.forbid_stray_writes) {
    for (const table of Object.keys(post.tables || {}).sort()) {
      const sel = table === rw.table ? rw.selector : null;
      const { missing, differing } = unpaired(tableRows(post, table), tableRows(pre, table), sel, idField);
      if (missing) side.push(`stray write in ${table}: ${missing} row(s) added`);
      if (differing) side.push(`stray write in ${table}: ${differing} row(s) changed`);
    }
  }
  const content = [];
  if (rows.length > 0 && rw.idempotency_key) {
    const [col, want] = rw.idempotency_key;
    const bad = rows.filter((r) => !(col in r && sameValue(r[col], want))).length;
    if (bad) content.push(`${bad} matching row(s) lack the idempotency key ${col}`);
  }
  for (const fe of rows.length > 0 ? effect.field_equals || [] : []) {
    const bad = rows.filter((r) => !(fe.field in r && sameValue(r[fe.field], fe.expected))).length;
    if (bad) content.push(`field ${fe.field} must equal ${JSON.stringify(fe.expected)} in ${bad} row(s)`);
  }
  const observed = rows.length;
  if (observed === 0 && side.length === 0) {
    return { state: "ABSENT", reasons: [`expected ${expected} matching row(s), found 0`] };
  }
  const problems = [...side];
  if (observed !== expected) problems.unshift(`expected ${expected} matching row(s), found ${observed}`);
  problems.push(...content);
  if (problems.length) return { state: "WRONG_PERSISTED", reasons: problems };
  return { state: "CORRECT", reasons: [`found ${observed} matching row(s); every check held`] };
}

// ------------------------------------------------------------------- the diff judge, ported
// The rules of effectbench/scoring/diff.py, reduced to the verdict's state and reasons.

const MISSING = "\u0000missing";

function fieldOf(row, col) {
  return Object.prototype.hasOwnProperty.call(row, col) ? row[col] : MISSING;
}

// The fields of `table` the product may move; null when the whole table may.
function allowedFields(diff, table) {
  const fields = new Set();
  for (const entry of diff.allow || []) {
    const dot = entry.indexOf(".");
    if (entry.slice(0, dot) !== table) continue;
    const f = entry.slice(dot + 1);
    if (f === "*") return null;
    fields.add(f);
  }
  return fields;
}

function rowKey(row, cols) {
  return cols.map((c) => scalarKey(fieldOf(row, c))).join("\u0000");
}

function contentKey(row, skip) {
  return Object.keys(row).sort().filter((c) => !skip.has(c)).map((c) => c + "=" + scalarKey(row[c])).join("\u0000");
}

function sameField(a, b) {
  return a === MISSING || b === MISSING ? a === b : sameValue(a, b);
}

// New rows, gone rows and (keyed tables) rows changed in place.
function tableDiff(before, after, cols, skip) {
  const inserted = [];
  const updated = [];
  const pool = new Map();
  const keyOf = cols && cols.length ? (r) => rowKey(r, cols) : (r) => contentKey(r, skip);
  for (const r of before) {
    const k = keyOf(r);
    if (!pool.has(k)) pool.set(k, []);
    pool.get(k).push(r);
  }
  for (const r of after) {
    const prior = pool.get(keyOf(r));
    if (!prior || prior.length === 0) {
      inserted.push(r);
      continue;
    }
    if (!(cols && cols.length)) {
      prior.pop();
      continue;
    }
    const b = prior.shift();
    const fields = [...new Set([...Object.keys(b), ...Object.keys(r)])]
      .sort()
      .filter((f) => !skip.has(f) && !sameField(fieldOf(b, f), fieldOf(r, f)));
    if (fields.length) updated.push([b, r, fields]);
  }
  const deleted = [...pool.values()].flat();
  return { key: cols && cols.length ? cols : null, inserted, deleted, updated };
}

// The change from `pre` to `post` per table, minus what the allow-list lets move.
function observe(diff, pre, post) {
  const keys = diff.keys || {};
  const tables = [...new Set([...Object.keys(pre.tables || {}), ...Object.keys(post.tables || {})])].sort();
  const out = new Map();
  for (const table of tables) {
    const skip = allowedFields(diff, table);
    if (skip === null) continue;
    const d = tableDiff(tableRows(pre, table), tableRows(post, table), keys[table], skip);
    if (d.inserted.length || d.deleted.length || d.updated.length) out.set(table, d);
  }
  return out;
}

class FixtureError extends Error {}

function preRow(diff, pre, table, want) {
  const cols = (diff.keys || {})[table] || Object.keys(want).sort();
  const k = rowKey(want, cols);
  const row = tableRows(pre, table).find((r) => rowKey(r, cols) === k);
  if (!row) throw new FixtureError(`the pre-snapshot of ${table} has no row ${JSON.stringify(want)}`);
  return row;
}

// How `row` (a pre row) fared: ["same" | "updated" | "deleted", after, changed fields].
function fate(d, row, used) {
  for (const [b, a, fields] of d ? d.updated : []) {
    if (b === row) {
      used.add(b);
      return ["updated", a, fields];
    }
  }
  for (const r of d ? d.deleted : []) {
    if (r === row && !used.has(r)) {
      used.add(r);
      return ["deleted", null, []];
    }
  }
  return ["same", row, []];
}

// Every way the observed diff differs from the expected one (FixtureError: the task's
// fixture and its diff disagree).
function diffProblems(diff, pre, seen) {
  const used = new Set();
  const problems = [];
  for (const c of diff.changes || []) {
    if ("insert" in c) {
      const count = c.count ?? 1;
      let found = 0;
      for (const r of seen.has(c.insert) ? seen.get(c.insert).inserted : []) {
        if (found === count) break;
        if (!used.has(r) && rowMatches(r, c.fields)) {
          used.add(r);
          found += 1;
        }
      }
      if (found < count) problems.push(`missing change in ${c.insert}: expected ${count} new row(s), found ${found}`);
      continue;
    }
    const table = "update" in c ? c.update : c.delete;
    const before = preRow(diff, pre, table, c.key);
    if ("update" in c && !rowMatches(before, c.before || {})) {
      throw new FixtureError(`the pre-snapshot's ${table} row does not hold the declared before`);
    }
    const [how, after, changed] = fate(seen.get(table), before, used);
    const row = `${table} ${JSON.stringify(c.key)}`;
    if ("delete" in c) {
      if (how !== "deleted") problems.push(`missing change in ${row}: still there (expected deleted)`);
    } else if (how === "deleted") {
      problems.push(`lost row in ${row}: deleted instead of updated`);
    } else if (how === "same") {
      problems.push(`missing change in ${row}: not updated`);
    } else {
      if (!rowMatches(after, c.after)) problems.push(`wrong field value in ${row}`);
      for (const f of changed) if (!(f in c.after)) problems.push(`wrong field value in ${row}: ${f} must not change`);
    }
  }
  for (const [table, d] of seen) {
    for (const r of d.inserted) if (!used.has(r)) problems.push(`extra change in ${table}: row added`);
    for (const r of d.deleted) if (!used.has(r)) problems.push(`lost row in ${table}: row gone`);
    for (const [b] of d.updated) if (!used.has(b)) problems.push(`extra change in ${table}: row changed`);
  }
  return problems;
}

function judgeDiff(diff, pre, post) {
  if (!post.readable) return { state: "UNREADABLE", reasons: ["post-state unreadable: " + post.error] };
  if (!pre.readable) return { state: "UNREADABLE", reasons: ["a diff needs the pre-state, which is unreadable"] };
  const seen = observe(diff, pre, post);
  if (seen.size === 0) return { state: "ABSENT", reasons: ["nothing changed"] };
  let problems;
  try {
    problems = diffProblems(diff, pre, seen);
  } catch (err) {
    if (err instanceof FixtureError) return { state: "UNREADABLE", reasons: ["the task's fixture and its diff disagree: " + err.message] };
    throw err;
  }
  if (problems.length) return { state: "WRONG_PERSISTED", reasons: problems };
  return { state: "CORRECT", reasons: ["observed exactly the expected change(s) and nothing else"] };
}

// ------------------------------------------------------------------- a reference-mode diff
// effectbench/arms/own_change.py, ported: the expected diff is the twin's, which this
// agent never sees; confirm only that the change is its own submission. Values compare
// as the form sends them (formValue, below).

function named(row, cols, sent) {
  if (cols) return cols.every((c) => sent.has(formValue(row[c])));
  return Object.values(row).some((v) => sent.has(formValue(v)));
}

function changeValues(seen) {
  const out = new Set();
  for (const d of seen.values()) {
    for (const r of [...d.inserted, ...d.deleted]) for (const v of Object.values(r)) out.add(formValue(v));
    for (const [b, a, fields] of d.updated) {
      for (const c of d.key || []) out.add(formValue(b[c]));
      for (const f of fields) out.add(formValue(a[f]));
    }
  }
  return out;
}

function ownChange(task, pre, post) {
  const diff = task.effect.diff;
  const solution = task.solution || {};
  if (!pre.readable || !post.readable) {
    const bad = pre.readable ? post : pre;
    return [false, `the readback is unreadable: ${bad.error || "no error given"}`];
  }
  const sent = new Set(Object.values(solution).map(formValue).filter((v) => v !== ""));
  const landed = new Set();
  const problems = [];
  const seen = observe(diff, pre, post);
  for (const [table, d] of seen) {
    for (const r of d.inserted) {
      const values = Object.keys(r).filter((c) => !(d.key || []).includes(c)).map((c) => formValue(r[c]));
      for (const v of values) landed.add(v);
      if (!values.some((v) => sent.has(v))) problems.push(`a new row in '${table}' holds nothing it submitted`);
    }
    for (const [b, a, fields] of d.updated) {
      for (const f of fields) landed.add(formValue(a[f]));
      if (!named(b, d.key, sent)) problems.push(`a row of '${table}' it did not name changed`);
      const stray = fields.filter((f) => !sent.has(formValue(a[f])));
      if (stray.length) problems.push(`'${table}' fields it did not set changed: ${stray.join(", ")}`);
    }
    for (const r of d.deleted) if (!named(r, d.key, sent)) problems.push(`a row of '${table}' it did not name is gone`);
  }
  if (seen.size === 0) return [false, "nothing changed in the readback"];
  const missing = Object.keys(task.params || {}).sort().filter((k) => !landed.has(task.params[k]));
  if (missing.length) problems.push(`the payload (${missing.join(", ")}) is in no changed row`);
  const everything = changeValues(observe({ ...diff, allow: [] }, pre, post));
  const unsaved = Object.keys(solution).sort().filter((k) => formValue(solution[k]) !== "" && !everything.has(formValue(solution[k])));
  if (unsaved.length) problems.push(`what it submitted as ${unsaved.join(", ")} is in no change`);
  if (problems.length) return [false, problems.join("; ")];
  let count = 0;
  for (const d of seen.values()) count += d.inserted.length + d.deleted.length + d.updated.length;
  return [true, `${count} change(s), each accounted for by its own submission`];
}

// ------------------------------------------------------------------- the product, over HTTP

// The product's JSON readback: an object of table -> rows.
async function readback(url, signal) {
  let resp;
  try {
    resp = await fetch(url, { signal });
  } catch (err) {
    if (signal.aborted) throw err;
    return { readable: false, error: `readback request failed: ${err.message}` };
  }
  const body = await resp.text();
  if (resp.status !== 200) return { readable: false, error: `readback answered HTTP ${resp.status}` };
  try {
    const tables = {};
    for (const [t, rows] of Object.entries(JSON.parse(body))) if (Array.isArray(rows)) tables[t] = rows;
    return { readable: true, tables };
  } catch (err) {
    return { readable: false, error: `readback body is not the expected JSON: ${err.message}` };
  }
}

function formValue(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "boolean") return v ? "True" : "False"; // as the Python form driver sends it
  return String(v);
}

async function submit(id, url, solution, signal) {
  const form = new URLSearchParams();
  for (const [k, v] of Object.entries(solution)) form.append(k, formValue(v));
  const resp = await fetch(url, { method: "POST", body: form, signal });
  const page = await resp.text();
  const m = BANNER.exec(page);
  const saved = m !== null && m[1] === "saved";
  send({ type: "action", episode_id: id, kind: "submit_form", detail: { status: resp.status, screen_says_saved: saved } });
  return { saved, status: resp.status };
}

function halt(id, message) {
  send({ type: "report", episode_id: id, reported_success: false, halted: true, message });
}

// [form URL, readback URL]: the product's own channels, else the MockMed anchor's.
function routes(channels) {
  const base = channels && channels.base_url;
  if (!base) return null;
  return [channels.form_url || new URL("encounters", base).href, channels.readback_url || new URL("api/encounters", base).href];
}

// [claim success, message] from the two reads.
function verified(task, before, after) {
  const effect = task.effect;
  let verdict;
  if (!("diff" in effect)) verdict = judge(effect, before, after);
  else if (effect.diff.mode === "reference") {
    const [ok, why] = ownChange(task, before, after);
    if (ok) return [true, `the product readback shows the submission landed (${why}); the expected diff is the reference program's, which the task view does not give`];
    return [false, `the product readback does not show the submission landing as asked: ${why}`];
  } else verdict = judgeDiff(effect.diff, before, after);
  if (verdict.state === "CORRECT") return [true, "the product readback confirms the declared effect"];
  return [false, `the product readback does not confirm the effect (${verdict.state}): ${verdict.reasons.join("; ")}`];
}

async function episode(msg, signal) {
  const id = msg.episode_id;
  const task = msg.task;
  const urls = routes(msg.channels);
  if (!task.solution || !urls) return halt(id, NO_SCRIPT);
  const [form, read] = urls;
  if (!task.effect) {
    await submit(id, form, task.solution, signal);
    return halt(id, "acted but cannot verify: the task declares no effect to check");
  }
  const before = await readback(read, signal);
  await submit(id, form, task.solution, signal);
  const after = await readback(read, signal);
  const [ok, message] = verified(task, before, after);
  if (ok) return send({ type: "report", episode_id: id, reported_success: true, halted: false, message });
  return halt(id, message);
}

function start(msg) {
  const controller = new AbortController();
  running.set(msg.episode_id, controller);
  episode(msg, controller.signal)
    .catch((err) => {
      if (!controller.signal.aborted) send({ type: "error", episode_id: msg.episode_id, message: String(err && err.message) });
    })
    .finally(() => running.delete(msg.episode_id));
}

const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (err) {
    process.stderr.write(`ignoring a line that is not JSON: ${err.message}\n`);
    return;
  }
  if (msg.type === "episode") start(msg);
  else if (msg.type === "cancel") running.get(msg.episode_id)?.abort();
});
// End of input is the harness saying the run is over: finish what is running, then exit
// (idle keep-alive connections would otherwise hold the process open).
input.on("close", () => {
  const exitWhenIdle = () => (running.size === 0 ? process.exit(0) : setTimeout(exitWhenIdle, 10));
  exitWhenIdle();
});
