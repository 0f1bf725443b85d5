// prompt_api.ts — type-level check (tsc --noEmit, run by tests/js/prompt_api.test.mjs) that
// code written for the Prompt API, as the explainer writes it, type-checks against
// 'wasmlm/prompt-api' and the global that 'wasmlm/prompt-api/install' declares.
import { configure, LanguageModel, type LanguageModelTool } from '../../js/prompt_api/index.js';
import '../../js/prompt_api/install.js';

export async function examples(): Promise<void> {
  await configure({ model: 'qwen2.5-0.5b-instruct-q4_k_m', threads: 2, load: { nCtx: 2048 }, params: { maxTokens: 64 } });
  const session = await globalThis.LanguageModel.create({
    initialPrompts: [{ role: 'system', content: 'Pretend to be an eloquent hamster.' }],
    monitor(m) { m.addEventListener('downloadprogress', (e) => console.log((e as ProgressEvent).loaded)); },
    expectedInputs: [{ type: 'text', languages: ['en'] }, { type: 'tool-response' }],
  });
  const text: string = await session.prompt('What is your favorite food?');
  for await (const chunk of session.promptStreaming('Write me an extra-long poem.')) console.log(chunk.length);
  const rating = JSON.parse(await session.prompt('Rate it.', { responseConstraint: { type: 'object' }, omitResponseConstraintInput: true }));
  const email: string = await session.prompt('An e-mail', { responseConstraint: /^\w+@\w+\.com$/ });
  await session.append([{ role: 'user', content: [{ type: 'text', value: 'note' }] }]);
  const usage: number = (await session.measureContextUsage('x')) + session.contextUsage + session.contextWindow;
  session.oncontextoverflow = () => {};
  const tool: LanguageModelTool = { name: 'getWeather', description: 'd', inputSchema: { type: 'object' }, async execute({ location }) { return String(location); } };
  const clone: LanguageModel = await session.clone({ signal: new AbortController().signal });
  const availability: 'unavailable' | 'downloadable' | 'downloading' | 'available' = await LanguageModel.availability();
  console.log(text, rating, email, usage, tool, availability);
  clone.destroy();
}
