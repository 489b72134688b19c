// Every method of agent-memory-server's JavaScript client (0.3.2, built from its source) against
// `memstream serve`, as a Node user calls them, with two tenants' keys. Run by
// tests/integration/test_ams_js_client.py, which passes:
//   CLIENT: the built client's ESM entry (dist/index.mjs)
//   MEMSTREAM_URL, KEY, TENANT: the server, a tenant key and its tenant
//   OTHER_KEY, OTHER: a second tenant's key and tenant
// It exits non-zero on the first failed assertion and prints what it checked.
import assert from "node:assert/strict";

const {
  MemoryAPIClient,
  MemoryServerError,
  SessionId,
  Topics,
} = await import(process.env.CLIENT);

const url = process.env.MEMSTREAM_URL;
const tenant = process.env.TENANT;
const other = process.env.OTHER;
const client = new MemoryAPIClient({ baseUrl: url, bearerToken: process.env.KEY });
const theirs = new MemoryAPIClient({ baseUrl: url, bearerToken: process.env.OTHER_KEY });
const checked = [];

function check(what) {
  checked.push(what);
}

async function eventually(what, condition, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function rejects(promise, expected, status) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof expected, `${error.name}: ${error.message}`);
    if (status !== undefined) assert.equal(error.statusCode, status, error.message);
    return error;
  }
  assert.fail(`expected a ${expected.name}`);
}

const suffix = Math.random().toString(36).slice(2, 10);
const deploy = `deploy-${suffix}`;
const invoice = `invoice-${suffix}`;

// -- health and long-term memory ---------------------------------------------------------------
const health = await client.healthCheck();
assert.equal(typeof health.now, "number");
check("healthCheck");

const created = await client.createLongTermMemory([
  { id: deploy, text: "The team deploys to production on Tuesdays", session_id: "js-s1", topics: ["deploys"] },
  { id: invoice, text: "Invoices go to billing at acme", session_id: "js-s2" },
]);
assert.match(created.status, /^ok/);
check("createLongTermMemory");

await eventually("both memories searchable", async () => {
  const found = await client.searchLongTermMemory({ text: "deploy invoices", limit: 10 });
  return found.memories.length === 2;
});
const hybrid = await client.searchLongTermMemory({ text: "when do we deploy?", searchMode: "hybrid", limit: 1 });
assert.equal(hybrid.memories[0].id, deploy);
assert.equal(hybrid.memories[0].namespace, tenant);
const keyword = await client.searchLongTermMemory({ text: "invoices", searchMode: "keyword" });
assert.deepEqual(keyword.memories.map((m) => m.id), [invoice]);
const filtered = await client.searchLongTermMemory({
  text: "",
  sessionId: new SessionId({ eq: "js-s1" }),
  topics: new Topics({ any: ["deploys"] }),
});
assert.deepEqual(filtered.memories.map((m) => m.id), [deploy]);
const prefixed = await client.searchLongTermMemory({ text: "", sessionId: new SessionId({ startswith: "js-s2" }) });
assert.deepEqual(prefixed.memories.map((m) => m.id), [invoice]);
check("searchLongTermMemory");

const all = [];
for await (const memory of client.searchAllLongTermMemories({ text: "", batchSize: 1 })) all.push(memory.id);
assert.deepEqual([...all].sort(), [deploy, invoice].sort());
check("searchAllLongTermMemories");

const one = await client.getLongTermMemory(deploy);
assert.equal(one.text, "The team deploys to production on Tuesdays");
check("getLongTermMemory");

const edited = await client.editLongTermMemory(deploy, { text: "The team deploys to production on Wednesdays" });
assert.equal(edited.text, "The team deploys to production on Wednesdays");
await eventually("the edit applied", async () => (await client.getLongTermMemory(deploy)).text.includes("Wednesdays"));
check("editLongTermMemory");

const prompt = await client.memoryPrompt({ query: "when do we deploy?", long_term_search: { text: "deploy", limit: 3 } });
const shown = prompt.messages.map((m) => (typeof m.content === "string" ? m.content : m.content.text)).join("\n");
assert.match(shown, /Wednesdays/);
check("memoryPrompt");

const bulk = await client.bulkCreateLongTermMemories(
  [
    [{ id: `bulk-a-${suffix}`, text: "Lunch is at noon" }],
    [{ id: `bulk-b-${suffix}`, text: "Standup is at nine" }],
  ],
);
assert.equal(bulk.length, 2);
await eventually("the bulk memories searchable", async () => {
  const found = await client.searchLongTermMemory({ text: "", limit: 10 });
  return found.memories.length === 4;
});
check("bulkCreateLongTermMemories");

const removed = await client.deleteLongTermMemories([invoice]);
assert.match(removed.status, /^ok/);
await eventually("the deleted memory gone", async () => {
  const found = await client.searchLongTermMemory({ text: "", limit: 10 });
  return !found.memories.some((m) => m.id === invoice);
});
assert.equal(await client.getLongTermMemory(invoice), null); // the client's answer to a 404
check("deleteLongTermMemories");

const forget = await client.forgetLongTermMemories({ policy: { max_age_days: 365, budget: 1 }, dryRun: true });
assert.equal(forget.dry_run, true);
assert.equal(forget.deleted, 2); // of three, the newest one stays within a budget of one
check("forgetLongTermMemories");

// -- working memory ----------------------------------------------------------------------------
const session = `js-chat-${suffix}`;
const put = await client.putWorkingMemory(session, {
  messages: [
    { role: "user", content: "My cat is called Miso" },
    { role: "assistant", content: "Noted: Miso" },
  ],
});
assert.equal(put.messages.length, 2);
check("putWorkingMemory");

const read = await client.getWorkingMemory(session);
assert.deepEqual(read.messages.map((m) => m.content), ["My cat is called Miso", "Noted: Miso"]);
check("getWorkingMemory");

const fresh = await client.getOrCreateWorkingMemory(`js-new-${suffix}`);
assert.equal(fresh.messages.length, 0);
check("getOrCreateWorkingMemory");

const sessions = await client.listSessions({ limit: 100 });
assert.ok(sessions.sessions.includes(session), JSON.stringify(sessions));
check("listSessions");

await eventually("the session's exchange recallable long-term", async () => {
  const found = await client.searchLongTermMemory({ text: "what is the cat called?", searchMode: "hybrid" });
  return found.memories.some((m) => m.text.includes("Miso"));
});
await client.deleteWorkingMemory(session);
assert.equal(await client.getWorkingMemory(session), null);
check("deleteWorkingMemory");

// -- summary views and tasks ------------------------------------------------------------------
const view = await client.createSummaryView({ name: "by type", source: "long_term", group_by: ["memory_type"] });
assert.deepEqual(view.group_by, ["memory_type"]);
check("createSummaryView");
assert.ok((await client.listSummaryViews()).some((v) => v.id === view.id));
check("listSummaryViews");
assert.equal((await client.getSummaryView(view.id)).name, "by type");
check("getSummaryView");
const part = await client.runSummaryViewPartition(view.id, { memory_type: "semantic" });
assert.equal(part.view_id, view.id);
assert.deepEqual(part.group, { memory_type: "semantic" });
assert.ok(part.memory_count > 0 && part.summary.startsWith("LLM summarization disabled"));
check("runSummaryViewPartition");
const task = await client.runSummaryView(view.id, { force: true });
assert.equal(task.view_id, view.id);
check("runSummaryView");
await eventually("the view's task done", async () => (await client.getTask(task.id)).status === "success");
check("getTask");
const parts = await client.listSummaryViewPartitions(view.id, { memoryType: "semantic" });
assert.deepEqual(parts.map((p) => p.group), [{ memory_type: "semantic" }]);
check("listSummaryViewPartitions");
assert.equal(await theirs.getSummaryView(view.id), null);
assert.equal(await theirs.getTask(task.id), null);
assert.deepEqual(await theirs.listSummaryViews(), []);
assert.equal((await client.deleteSummaryView(view.id)).status, "ok");
assert.equal(await client.getSummaryView(view.id), null);
assert.equal(await client.getTask("no-such-task"), null);
check("deleteSummaryView");

// -- another tenant ----------------------------------------------------------------------------
const foreign = await theirs.searchLongTermMemory({ text: "deploy Wednesdays lunch standup", searchMode: "hybrid" });
assert.deepEqual(foreign.memories, []);
assert.equal(await theirs.getLongTermMemory(deploy), null);
await rejects(theirs.searchLongTermMemory({ text: "deploy", namespace: { eq: tenant } }), MemoryServerError, 403);
assert.equal(await theirs.getWorkingMemory(`js-new-${suffix}`), null);
const theirSessions = await theirs.listSessions({});
assert.ok(!theirSessions.sessions.includes(`js-new-${suffix}`));
assert.notEqual(tenant, other);
check("a second tenant's key sees none of it");

console.log(JSON.stringify({ checked }));
