// The review team on Ollama's REST API with Node's fetch: three reviewers, each a two-turn
// conversation. `review` is correct; `reviewInTurn` awaits each reviewer before the next.
import { execSync } from "node:child_process";

const TURNS = ["Review this change: the cache now expires entries lazily.", "Now name the riskiest line."];
export const REVIEWERS = ["security", "performance", "style"];

async function reviewer(host, name) {
  const messages = [{ role: "system", content: `You are the ${name} reviewer.` }];
  for (const turn of TURNS) {
    messages.push({ role: "user", content: turn });
    const res = await fetch(`${host}/api/chat`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "gemma3", messages, stream: false, options: { num_predict: 30 } }),
    });
    if (!res.ok) throw new Error(`chat: ${res.status} ${await res.text()}`);
    messages.push((await res.json()).message);
  }
  return messages.at(-1).content;
}

export const review = (host) => Promise.all(REVIEWERS.map((n) => reviewer(host, n)));

export async function reviewInTurn(host) {
  const out = [];
  for (const n of REVIEWERS) out.push(await reviewer(host, n)); // the bug: one at a time
  return out;
}

// Triage on /api/generate: three triagers, each asking, looking the incident up (a 300 ms
// lookup), then asking again; no X-Agent label, no conversation carried, so nothing in one run
// tells whose call is whose. `lookup` awaits a timer; `blockingLookup` runs `sleep` with
// execSync, which holds the event loop: the triagers' lookups run one after another.
async function generate(host, prompt) {
  const res = await fetch(`${host}/api/generate`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "gemma3", prompt, stream: false, options: { num_predict: 20 } }),
  });
  if (!res.ok) throw new Error(`generate: ${res.status} ${await res.text()}`);
  return (await res.json()).response;
}

const lookup = () => new Promise((resolve) => setTimeout(resolve, 300));
const blockingLookup = async () => execSync("sleep 0.3");

async function triager(host, name, look) {
  await generate(host, `Triage incident ${name}: what is broken?`);
  await look();
  return generate(host, `Incident ${name}: the lookup answered; what next?`);
}

export const triage = (host) => Promise.all(["disk", "network", "auth"].map((n) => triager(host, n, lookup)));
export const triageBlocking = (host) =>
  Promise.all(["disk", "network", "auth"].map((n) => triager(host, n, blockingLookup)));
