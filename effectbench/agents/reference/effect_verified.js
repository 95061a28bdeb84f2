#!/usr/bin/env node
// A reference agent in Node.js for the EffectBench agent protocol (docs/agent-protocol.md).
//
// It does what effectbench.arms.baselines.EffectVerifiedArm does, over the product's
// own HTTP API and nothing else: read the record back, submit the form once, read it
// back again, and claim success only when the declared effect holds in what the product
// reads back. No npm packages: Node's built-in fetch and readline.
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

// ------------------------------------------------------------------- the product, over HTTP

async function readback(base, signal) {
  let resp;
  try {
    resp = await fetch(new URL("api/encounters", base), { signal });
  } catch (err) {
    if (signal.aborted) throw err;
    return { readable: false, error: `readback request failed: ${err.message}` };
  }
  const body = await resp.text();
  if (resp.status !== 200) return { readable: false, error: `readback answered HTTP ${resp.status}` };
  try {
    return { readable: true, tables: { encounters: JSON.parse(body).encounters } };
  } catch (err) {
    return { readable: false, error: `readback body is not the expected JSON: ${err.message}` };
  }
}

function formValue(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "boolean") return v ? "True" : "False"; // as the Python form driver sends it
  return String(v);
}

async function submit(id, base, solution, signal) {
  const form = new URLSearchParams();
  for (const [k, v] of Object.entries(solution)) form.append(k, formValue(v));
  const resp = await fetch(new URL("encounters", base), { method: "POST", body: form, signal });
  const page = await resp.text();
  const m = BANNER.exec(page);
  const saved = m !== null && m[1] === "saved";
  send({ type: "action", episode_id: id, kind: "submit_form", detail: { status: resp.status, screen_says_saved: saved } });
  return { saved, status: resp.status };
}

function halt(id, message) {
  send({ type: "report", episode_id: id, reported_success: false, halted: true, message });
}

async function episode(msg, signal) {
  const id = msg.episode_id;
  const task = msg.task;
  const base = msg.channels && msg.channels.base_url;
  if (!task.solution || !base) return halt(id, NO_SCRIPT);
  if (!task.effect) {
    await submit(id, base, task.solution, signal);
    return halt(id, "acted but cannot verify: the task declares no effect to check");
  }
  const before = await readback(base, signal);
  await submit(id, base, task.solution, signal);
  const after = await readback(base, signal);
  const verdict = judge(task.effect, before, after);
  if (verdict.state === "CORRECT") {
    return send({ type: "report", episode_id: id, reported_success: true, halted: false, message: "the product readback confirms the declared effect" });
  }
  return halt(id, `the product readback does not confirm the effect (${verdict.state}): ${verdict.reasons.join("; ")}`);
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
