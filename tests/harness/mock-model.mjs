// A model server on 127.0.0.1 for the real agent CLIs, offline: the OpenAI
// Responses API (POST /v1/responses, server-sent events) for Codex and the
// Anthropic Messages API (POST /v1/messages, streamed or not) for Claude
// Code and OpenCode. Every answer is a short text with no tool call. Each
// request body is kept, so a test can check what a resumed session sent.
import { createServer } from 'node:http';

/** The text the model answers to the n-th request it served (1-based). */
export const answer = (n) => `mock answer #${n}.`;

/**
 * Starts the server; resolves to `{ url, requests, clear, close }`.
 * `requests` lists `{ path, body, n }` (the body parsed as JSON; `n` numbers
 * the answer, and keeps counting after `clear`) in arrival order.
 */
export function startMockModel() {
  const requests = [];
  let served = 0;
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = { unparsed: text };
      }
      const path = req.url.split('?')[0];
      if (req.method !== 'POST') {
        // Model lists and anything else a client probes for: nothing here.
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"type":"not_found","message":"mock model server"}}');
        return;
      }
      served += 1;
      const n = served;
      requests.push({ path, body, n });
      if (path.endsWith('/responses')) return responses(res, body, n);
      if (path.endsWith('/messages/count_tokens')) return json(res, { input_tokens: 10 });
      if (path.endsWith('/messages')) return messages(res, body, n);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"type":"not_found","message":"mock model server"}}');
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `http://127.0.0.1:${port}`,
        requests,
        clear: () => requests.splice(0),
        close: () => new Promise((done) => server.close(done)),
      });
    });
  });
}

function json(res, value) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

function sse(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  return (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** OpenAI Responses API, streamed. */
function responses(res, body, n) {
  const id = `resp_mock_${n}`;
  const text = answer(n);
  const model = body?.model ?? 'mock-model';
  const item = {
    type: 'message',
    id: `msg_mock_${n}`,
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [] }],
  };
  const base = { id, object: 'response', created_at: Math.floor(Date.now() / 1000), model };
  const send = sse(res);
  send('response.created', { type: 'response.created', response: { ...base, status: 'in_progress', output: [] } });
  send('response.output_item.added', {
    type: 'response.output_item.added',
    output_index: 0,
    item: { ...item, status: 'in_progress', content: [] },
  });
  send('response.output_text.delta', {
    type: 'response.output_text.delta',
    item_id: item.id,
    output_index: 0,
    content_index: 0,
    delta: text,
  });
  send('response.output_item.done', { type: 'response.output_item.done', output_index: 0, item });
  send('response.completed', {
    type: 'response.completed',
    response: {
      ...base,
      status: 'completed',
      output: [item],
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 13,
      },
    },
  });
  res.end();
}

/** Anthropic Messages API, streamed when asked. */
function messages(res, body, n) {
  const text = answer(n);
  const message = {
    id: `msg_mock_${n}`,
    type: 'message',
    role: 'assistant',
    model: body?.model ?? 'mock-model',
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 0 },
  };
  if (!body?.stream) {
    json(res, {
      ...message,
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 10, output_tokens: 3 },
    });
    return;
  }
  const send = sse(res);
  send('message_start', { type: 'message_start', message });
  send('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
  send('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
  send('content_block_stop', { type: 'content_block_stop', index: 0 });
  send('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: 'end_turn', stop_sequence: null },
    usage: { output_tokens: 3 },
  });
  send('message_stop', { type: 'message_stop' });
  res.end();
}
