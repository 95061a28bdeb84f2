#!/usr/bin/env node
// An EffectBench protocol agent (docs/agent-protocol.md) that drives the episode's own
// browser with Puppeteer: it opens the product's form, fills it from the task's
// solution, clicks Save and trusts the banner the next page shows. It never reads the
// records, so it scores like the reference screen-only agent (MockMed: SWER 5/9 a trial).
//
//   effectbench run --arm 'puppeteer=exec+browser:node examples/puppeteer-agent/agent.js' --isolate
"use strict";

const readline = require("node:readline");
const puppeteer = require("puppeteer-core");

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");

const report = (episodeId, success, message) =>
  send({ type: "report", episode_id: episodeId, reported_success: success, halted: !success, message });

// Fill each form field the solution names: pick a select's option, type a text field.
async function fill(page, solution) {
  for (const [name, value] of Object.entries(solution)) {
    const selector = `form [name="${name}"]`;
    const field = await page.$(selector);
    if (!field) continue;
    const text = value === null ? "" : String(value);
    const tag = await field.evaluate((e) => e.tagName.toLowerCase());
    if (tag === "select") {
      await page.select(selector, text);
    } else {
      await field.evaluate((e) => { e.value = ""; });
      if (text) await field.type(text);
    }
  }
}

// Submit and read the banner; null when the next page did not load (an error page).
async function submit(page) {
  try {
    await Promise.all([page.waitForNavigation(), page.click("form button[type=submit]")]);
  } catch (err) {
    return null;
  }
  return page.evaluate(() => {
    const b = document.getElementById("banner");
    return b ? { saved: b.className.split(/\s+/).includes("saved"), text: b.textContent.trim() } : null;
  });
}

async function episode(msg) {
  const id = msg.episode_id;
  const base = msg.channels.web_url || msg.channels.base_url;
  const endpoint = msg.browser && msg.browser.cdp_url;
  if (!endpoint) return report(id, false, "no browser: run me with exec+browser:");
  if (!msg.task.solution || !base) return report(id, false, "no scripted action: the task offers no solution");
  // The endpoint's WebSocket URL: browserURL would drop the path that names the episode.
  const browser = await puppeteer.connect({ browserWSEndpoint: endpoint, defaultViewport: null });
  let banner;
  try {
    const [page] = await browser.pages();
    await page.goto(base);
    await fill(page, msg.task.solution);
    banner = await submit(page);
  } finally {
    await browser.disconnect();
  }
  const saved = Boolean(banner && banner.saved);
  send({ type: "action", episode_id: id, kind: "submit_form", detail: { screen_says_saved: saved } });
  const text = banner ? banner.text : "no banner";
  return report(id, saved, saved ? `screen says saved: ${text}` : `screen did not confirm the save: ${text}`);
}

// One process serves many episodes at once; end of stdin means the run is over.
const running = new Set();
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  if (msg.type !== "episode") return; // "cancel": the harness has given up on it already
  const job = episode(msg)
    .catch((err) => send({ type: "error", episode_id: msg.episode_id, message: String(err) }))
    .finally(() => running.delete(job));
  running.add(job);
}).on("close", () => Promise.all(running).then(() => process.exit(0)));
