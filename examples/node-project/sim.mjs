// A few lines a Node project keeps to use sim-ollama from its tests: start the binary on a free
// port with the model preloaded, take a mark, ask the judge (docs/judge.md, "Over HTTP").
// The binary: SIM_OLLAMA_BIN, else `sim-ollama` on PATH (the Python wheel installs it; or
// `cargo install --path sim-ollama`).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export async function startSim({ preset = "ideal", models = ["gemma3"], timeScale = 0.1 } = {}) {
  const bin = process.env.SIM_OLLAMA_BIN || "sim-ollama";
  const args = ["--port", "0", "--preset", preset, "--time-scale", String(timeScale)];
  for (const m of models) args.push("--preload", m);
  // This process runs the agents: the judge weighs their waits for each other against its CPU
  // time and waits for a CPU (docs/judge.md, "The program's CPU").
  args.push("--client-pid", String(process.pid));
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const urls = [];
  await new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => reject(new Error(`sim-ollama did not listen within 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      if (line.startsWith("sim-ollama listening on ")) urls.push(line.split(" ").pop());
      if (line.startsWith("sim-ollama ready")) { clearTimeout(timer); resolve(); }
    });
    child.on("error", (e) => { clearTimeout(timer); reject(e); });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`sim-ollama exited with ${code}: ${stderr.trim()}`)); });
  });
  const url = urls[0];
  const call = async (method, path) => {
    const res = await fetch(url + path, { method });
    const body = await res.json();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status}: ${body.error}`);
    return body;
  };
  const mark = async () => (await call("POST", "/sim/mark")).mark;
  const judge = async (params = {}) => call("GET", "/sim/judge?" + new URLSearchParams(params));
  return {
    url,
    urls,
    pid: child.pid,
    mark,
    judge,
    // Runs `program(url)`, judges it, and where the verdict waits on a probe run (the gaps
    // between the agents' calls decide it, or agents nothing tells apart: docs/judge.md, "The
    // gaps between calls") runs it once more as the probe run and judges both; where that
    // verdict rests on waits the probe found and does not pass, runs it a third time to
    // confirm them (a pause of the whole process in one run reads the same: docs/judge.md, "A
    // confirmation run"). `program` must make the same calls each time (the simulator answers
    // them the same way).
    // Where the verdict may be the machine's (`rerun`: the simulator itself late, a stall
    // reading the last answer), the whole once more in a new window, whose verdict stands.
    judgeProgram: async (program, params = {}) => {
      const doc = await judgeOnce(program, params);
      return doc.report.rerun ? judgeOnce(program, params) : doc;
    },
    stop: () => new Promise((resolve) => { child.removeAllListeners("exit"); child.on("exit", resolve); child.kill("SIGTERM"); }),
  };
  async function judgeOnce(program, params) {
    await mark();
    await program(url);
    let doc = await judge(params);
    if (!doc.report.needs_probe) return doc;
    await call("POST", "/sim/probe");
    await program(url);
    doc = await judge(params);
    const expected = Object.keys(doc.expectations).length > 0;
    if (!doc.report.confirm || (expected && doc.passed)) return doc;
    await call("POST", "/sim/confirm?run=" + doc.report.confirm);
    await program(url);
    return judge(params);
  }
}

/** The judge's report in words, for an assertion's message. */
export function explain(doc) {
  const r = doc.report;
  return [
    `client: ${r.verdict} (cause: ${r.cause}): ${r.reason}`,
    `deployment: ${r.deployment.verdict} (limit: ${r.deployment.limit}): ${r.deployment.reason}`,
    ...doc.failures.map((f) => `failed: ${f}`),
  ].join("\n");
}
