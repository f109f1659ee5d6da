// The real clients of both stream protocols against a running site: the AI SDK's
// DefaultChatTransport read by readUIMessageStream (what useChat does), and AG-UI's HttpAgent
// (which checks every event with the protocol's schemas and its order rules).
// Usage: node protocol_clients.mjs BASE_URL TOKEN CHAIN QUESTION; prints one JSON object.
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { HttpAgent } from '@ag-ui/client';

const [base, token, chain, question] = process.argv.slice(2);
const headers = { Authorization: `Token ${token}` };

async function aiSdk() {
  const transport = new DefaultChatTransport({ api: `${base}/api/chains/${chain}/ai-sdk/`, headers });
  const stream = await transport.sendMessages({
    chatId: 'js-chat',
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: question }] }],
  });
  let message;
  for await (const state of readUIMessageStream({ stream, terminateOnError: true })) {
    message = state;
  }
  return message;
}

async function agUi() {
  const agent = new HttpAgent({
    url: `${base}/api/chains/${chain}/ag-ui/`,
    headers,
    threadId: 'js-thread',
    initialMessages: [{ id: 'u1', role: 'user', content: question }],
  });
  const events = [];
  let outcome;
  let error;
  const run = await agent.runAgent({ runId: 'js-run' }, {
    onEvent: ({ event }) => { events.push(event.type); },
    onRunFinishedEvent: (params) => { outcome = params.outcome; },
    onRunErrorEvent: ({ event }) => { error = event.message; },
  });
  return { events, outcome, error, result: run.result, messages: agent.messages };
}

console.log(JSON.stringify({ aiSdk: await aiSdk(), agUi: await agUi() }));
