// The review team on Ollama's REST API with Node's fetch: three reviewers, each a two-turn
// conversation. `review` is correct; `reviewInTurn` awaits each reviewer before the next.
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
