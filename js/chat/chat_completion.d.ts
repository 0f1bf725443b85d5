// chat_completion.d.ts — the types of Engine.chatCompletion (js/chat/chat_completion.js): OpenAI's
// chat-completions request, response and stream chunk, as far as wasmlm supports them. The
// shapes are OpenAI's (tests/js/openai_types.test.mjs checks that ChatCompletion and
// ChatCompletionChunk here are assignable to the `openai` package's types of the same name).
//
// Tool calls: the tools are given to the chat template (as Hugging Face's
// apply_chat_template(tools=…)), and the model's calls are read in its template's syntax,
// recognised from the template: Hermes <tool_call>{…}</tool_call> (Qwen2.5, Qwen3, SmolLM3),
// Llama 3.1 / 3.2 JSON {"name", "parameters"} (optionally after <|python_tag|>), Mistral
// [TOOL_CALLS][…]; any other template (Gemma 3, Phi-3.5, …) gets the generic form: the tools
// are described in a system message and the answer is one JSON object, {"tool_calls": […]} or
// {"response": "…"}. A grammar built from the tools' JSON Schemas (`parameters`) holds every
// call: with tool_choice 'required' or a named function from the first token; with 'auto'
// lazily, from the moment the model writes the format's opening (e.g. <tool_call>), so text
// before a call is free (generic form: the whole answer, which is JSON).

/** A text part of a message's content. */
export interface ChatCompletionContentPartText { type: 'text'; text: string }

/**
 * An image part (user messages; needs load()'s mmproj): OpenAI's {type: 'image_url', image_url:
 * {url, detail?}} with a data:, blob: or http(s): URL (detail is ignored), or this library's
 * {type: 'image', image} with any ImageInput (bytes, Blob, ImageBitmap, raw pixels; a string only as
 * a URL: parts never read files, so a request body cannot read a server's). It becomes
 * llama.cpp's media marker in the rendered prompt, then the image's tokens. Other keys are
 * refused, naming them.
 */
export type ChatCompletionContentPartImage =
  | { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' } | string }
  | { type: 'image'; image: import('../wasmlm.js').ImageInput };

/** A tool call in an assistant message of the request (OpenAI's shape; arguments as JSON text). */
export interface ChatCompletionMessageToolCall {
  id: string;
  type: 'function';
  function: { name: string; /** JSON text of the arguments object. */ arguments: string };
}

/**
 * A message of the request. Roles: 'system' (or 'developer', treated as 'system'), 'user',
 * 'assistant' (content may be null when it has tool_calls), 'tool' (the result of the call
 * tool_call_id; its function's name is found from the earlier call). Content: a string, null,
 * or text parts (joined) and, in user messages, image parts. Other fields (audio, function_call, …) are errors naming them.
 */
export type ChatCompletionMessageParam =
  | { role: 'system' | 'developer'; content: string | ChatCompletionContentPartText[]; name?: string }
  | { role: 'user'; content: string | (ChatCompletionContentPartText | ChatCompletionContentPartImage)[]; name?: string }
  | { role: 'assistant'; content?: string | ChatCompletionContentPartText[] | null; name?: string;
      tool_calls?: ChatCompletionMessageToolCall[]; refusal?: string | null }
  | { role: 'tool'; content: string | ChatCompletionContentPartText[]; tool_call_id: string; name?: string };

/** A function the model may call. `parameters` is a JSON Schema of its arguments object,
 *  converted to a grammar (the keywords of Engine.jsonSchemaToGrammar; unsupported ones are
 *  ignored, leniently, rather than refused). A tool without parameters takes {}. */
export interface ChatCompletionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: object; strict?: boolean | null };
}

/**
 * OpenAI's request body. Supported: messages, model (echoed), tools, tool_choice,
 * parallel_tool_calls (default true: several calls in one turn), temperature (0..2, default 1),
 * top_p (default 1), max_tokens / max_completion_tokens (default: until the end of the turn or
 * of the context), stop (up to 8 strings of 1..63 bytes), seed, logprobs / top_logprobs (0..20),
 * response_format (not with tools unless tool_choice is 'none'), stream, stream_options
 * ({include_usage}), n (1 only), frequency_penalty, presence_penalty, logit_bias (token id →
 * -100..100; -100 bans), user (ignored). Ours (llama.cpp server's names): top_k, min_p,
 * typical_p, repeat_penalty, repeat_last_n, cache_prompt (default true: reuse the KV cache of
 * the conversation so far), chat_template (Jinja source instead of the model's), and
 * chat_template_kwargs (more template variables, e.g. {enable_thinking: false}).
 * reasoning_effort ('low' | 'medium' | 'high') is the template variable of that name (gpt-oss's
 * template writes it in the system message); an error with a template that has none.
 * Accepted and ignored (OpenAI's service's identifiers and cache hints; the prompt cache here is
 * the engine's own, cache_prompt): prompt_cache_key, prompt_cache_retention,
 * prompt_cache_options, safety_identifier, stream_options.include_obfuscation.
 * Refused with an error naming the field: functions, function_call, audio, modalities,
 * prediction, service_tier, store, metadata, web_search_options, verbosity, moderation,
 * n > 1. Any other field (neither OpenAI's nor ours above) is rejected: WasmlmError
 * WLM_ERR_INVALID_ARG 'chatCompletion(): unknown field "x" (known: …)' (js/options.js); so are
 * unknown keys of stream_options and response_format (and its json_schema).
 * tool_choice 'none' leaves the tools out of the prompt.
 */
export interface ChatCompletionRequest {
  messages: ChatCompletionMessageParam[];
  model?: string;
  tools?: ChatCompletionTool[];
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };
  parallel_tool_calls?: boolean;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  stop?: string | string[];
  seed?: number;
  logprobs?: boolean;
  top_logprobs?: number;
  response_format?:
    | { type: 'text' }
    | { type: 'json_object' }
    | { type: 'json_schema'; json_schema: { schema: object | boolean; name?: string; description?: string; strict?: boolean } };
  stream?: boolean;
  stream_options?: { include_usage?: boolean; include_obfuscation?: boolean };
  n?: 1;
  frequency_penalty?: number;
  presence_penalty?: number;
  logit_bias?: Record<string, number>;
  user?: string;
  top_k?: number;
  min_p?: number;
  typical_p?: number;
  repeat_penalty?: number;
  repeat_last_n?: number;
  cache_prompt?: boolean;
  chat_template?: string;
  chat_template_kwargs?: Record<string, unknown>;
  reasoning_effort?: 'low' | 'medium' | 'high';
  prompt_cache_key?: string;
  prompt_cache_retention?: string | null;
  prompt_cache_options?: object;
  safety_identifier?: string;
}

/** One token's log-probability (every generated token, tool-call text included). */
export interface ChatCompletionTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
}

/** Token counts: the prompt (cached_tokens of it reused from the KV cache) and the answer. */
export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/**
 * Why the turn ended: 'tool_calls' (it holds calls), 'stop' (end of turn or a stop string),
 * 'length' (max_tokens or the context: a call may then be cut short, its arguments incomplete
 * JSON, as OpenAI reports it).
 */
export type ChatCompletionFinishReason = 'stop' | 'length' | 'tool_calls';

/** OpenAI's chat.completion object. */
export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  /** Unix time, seconds. */
  created: number;
  model: string;
  choices: {
    index: number;
    message: {
      role: 'assistant';
      /** The text outside tool calls (and outside the reasoning); null when the turn is only
       *  calls. */
      content: string | null;
      refusal: null;
      tool_calls?: ChatCompletionMessageToolCall[];
      /**
       * A thinking model's reasoning, apart from the answer (the DeepSeek / llama.cpp server
       * field; js/chat/reasoning.js): the text of its <think>…</think> block (Qwen3, Qwen3.5, SmolLM3;
       * whitespace around it dropped), of its <|channel>thought…<channel|> (Gemma 4) or of its
       * harmony analysis channel (gpt-oss). Present only
       * when the template has such a syntax and the model wrote some. A tool call written inside
       * the reasoning is not a call, and with tool_choice 'auto' a call marker written there does
       * not wake the tool-call grammar (its triggers are armed only after </think> or <channel|>, or in a
       * harmony message's header: GenerateParams.grammarArms).
       */
      reasoning_content?: string;
    };
    logprobs: { content: ChatCompletionTokenLogprob[] | null; refusal: null } | null;
    finish_reason: ChatCompletionFinishReason;
    /**
     * wasmlm's addition, present only when the model began a call it did not write in its
     * format (free text that merely looked like a call's opening, or a call cut short): why.
     * The text from where the call became unusable is then in content, as written.
     */
    tool_call_error?: string;
  }[];
  usage: CompletionUsage;
}

/** A tool-call fragment of a stream: the first of a call has id, type and name (arguments
 *  ''), the next ones pieces of the arguments' JSON text, in order. */
export interface ChatCompletionChunkToolCall {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

/**
 * OpenAI's chat.completion.chunk. The first chunk's delta is {role: 'assistant', content: ''};
 * then content and tool-call fragments as the text decides them (text that may begin a call's
 * opening, or white space before one, waits until it is known not to); the last chunk has an
 * empty delta and the finish_reason; with stream_options.include_usage, one more chunk with no
 * choices carries the usage (the others usage: null). The deltas add up to the non-streamed
 * response of the same request and seed. With logprobs, a token's entry rides on the first
 * chunk of what it produced (or a chunk with an empty delta).
 */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    /** reasoning_content: a piece of the reasoning (see ChatCompletion's message), in order. */
    delta: { role?: 'assistant'; content?: string | null; reasoning_content?: string; tool_calls?: ChatCompletionChunkToolCall[] };
    logprobs?: { content: ChatCompletionTokenLogprob[] | null; refusal: null } | null;
    finish_reason: ChatCompletionFinishReason | null;
    /** As ChatCompletion's, on the last chunk. */
    tool_call_error?: string;
  }[];
  usage?: CompletionUsage | null;
}
