// A test of an agent built on LiveKit agents-js (@livekit/agents + the OpenAI realtime plugin), run against the
// `rtrace serve` of rtrace.globalSetup.mjs: one user turn, the tool call the model makes, the answer after it.
import { initializeLogger, llm } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import { expect, inject, test } from 'vitest';

initializeLogger({ pretty: false, level: 'warn' });

const lookupOrder = llm.tool({
  name: 'lookup_order',
  description: 'Look up an order by its number.',
  parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
  execute: async ({ order_id: id }) => `order ${id}: shipped, arrives Tuesday`,
});

async function readGeneration(gen) {
  let text = '';
  const calls = [];
  await Promise.all([
    (async () => {
      for await (const message of gen.messageStream) {
        for await (const chunk of message.textStream) text += typeof chunk === 'string' ? chunk : (chunk?.text ?? '');
      }
    })(),
    (async () => {
      for await (const call of gen.functionStream) calls.push(call);
    })(),
  ]);
  return { text, calls };
}

// A reply asked for while the socket drops is lost: the plugin rejects it ("Session reconnected") or, when it went
// out on the dying socket after that, lets it time out ("generateReply timed out."), and never sends it again. Ask
// once more, as an agent that wants its answer does (the drop is this test's fault).
function reply(session, tries = 3) {
  session.generateReply().catch((error) => {
    if (tries > 1 && /reconnected|timed out/.test(String(error?.message))) reply(session, tries - 1);
  });
}

test('the agent looks the order up and says when it arrives', async () => {
  const model = new openai.realtime.RealtimeModel({
    baseURL: inject('rtraceUrl'),
    apiKey: 'sk-test',
    modalities: ['text'],
    turnDetection: null,
    inputAudioTranscription: null,
  });
  const session = model.session();
  const answer = new Promise((resolve) => {
    session.on('generation_created', async (gen) => {
      const { text, calls } = await readGeneration(gen);
      if (calls.length === 0) {
        if (text) resolve(text);
        return;
      }
      // as AgentActivity does: the outputs pushed with a copy of the chat context, then a new reply
      const chatCtx = session.chatCtx.copy();
      for (const call of calls) {
        const output = await lookupOrder.execute(JSON.parse(call.args || '{}'), {});
        chatCtx.items.push(llm.FunctionCallOutput.create({ callId: call.callId, output, isError: false, name: call.name }));
      }
      await session.updateChatCtx(chatCtx).catch(() => {});
      reply(session);
    });
  });
  await session.updateTools(new llm.ToolContext([lookupOrder]));
  const chatCtx = session.chatCtx.copy();
  chatCtx.addMessage({ role: 'user', content: 'Where is my order A-1234?' });
  await session.updateChatCtx(chatCtx);
  reply(session);
  expect(await answer).toContain('arrives Tuesday');
  await session.close();
});
