// The real clients of both stream protocols against a running site: the AI SDK's
// DefaultChatTransport read by readUIMessageStream (what useChat does), and AG-UI's HttpAgent
// (which checks every event with the protocol's schemas and its order rules).
// Usage: node protocol_clients.mjs BASE_URL TOKEN CHAIN QUESTION [approve]; prints one JSON
// object. With "approve", the turn pauses for approval: each client answers it (AI SDK: the
// tool part answered as addToolApprovalResponse does, the messages sent back; AG-UI: a run
// whose resume answers the interrupt) and reads the resumed turn.
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { HttpAgent } from '@ag-ui/client';

const [base, token, chain, question, mode] = process.argv.slice(2);
const headers = { Authorization: `Token ${token}` };

async function read(stream, message) {
  let last = message;
  for await (const state of readUIMessageStream({ stream, message, terminateOnError: true })) {
    last = state;
  }
  return last;
}

async function aiSdk() {
  const transport = new DefaultChatTransport({ api: `${base}/api/chains/${chain}/ai-sdk/`, headers });
  const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: question }] };
  const send = (messages) => transport.sendMessages({
    chatId: 'js-chat', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages,
  });
  const first = await read(await send([user]));
  if (mode !== 'approve') return { first };
  // What addToolApprovalResponse does to the paused message's tool part.
  const answered = structuredClone(first);
  for (const part of answered.parts) {
    if (part.state === 'approval-requested') {
      part.state = 'approval-responded';
      part.approval = { ...part.approval, approved: true };
    }
  }
  const resumed = await read(await send([user, answered]), answered);
  return { first, resumed };
}

async function agUi() {
  const agent = new HttpAgent({
    url: `${base}/api/chains/${chain}/ag-ui/`,
    headers,
    threadId: 'js-thread',
    initialMessages: [{ id: 'u1', role: 'user', content: question }],
  });
  const runs = [];
  const run = async (parameters) => {
    const seen = { events: [] };
    const done = await agent.runAgent(parameters, {
      onEvent: ({ event }) => { seen.events.push(event.type); },
      onRunFinishedEvent: (params) => {
        seen.outcome = params.outcome;
        seen.interrupts = params.interrupts;
      },
      onRunErrorEvent: ({ event }) => { seen.error = event.message; },
    });
    seen.result = done.result;
    runs.push(seen);
    return seen;
  };
  const first = await run({ runId: 'js-run-1' });
  if (mode === 'approve') {
    const resume = first.interrupts.map((interrupt) => (
      { interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }
    ));
    await run({ runId: 'js-run-2', resume });
  }
  return { runs, messages: agent.messages };
}

console.log(JSON.stringify({ aiSdk: await aiSdk(), agUi: await agUi() }));
