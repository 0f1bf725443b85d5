// tools/synth/shapes.mjs — the architectures the synthesizer writes (ARCHS; EMBED_ARCHS, the
// embedding-only ones), each one's shapes (SHAPES: the tiny test shapes and the exact dimensions
// of published models) and resolveShape, which fills in a shape's defaults.

export const ARCHS = Object.freeze(['llama', 'qwen2', 'qwen2vl', 'qwen3', 'gemma3', 'phi3', 'gpt2', 'qwen35', 'lfm2', 'smollm3', 'qwen3moe', 'lfm2moe', 'gpt-oss', 'gemma4']);
/** The embedding-only architectures (no next-token classifier): the encoders of describeEncoder
 *  and EmbeddingGemma (describeGemmaEmbedding). */
export const EMBED_ARCHS = Object.freeze(['bert', 'nomic-bert', 'gemma-embedding']);

// Llama 3.1/3.2's RoPE scaling (rope_scaling.rope_type "llama3").
const LLAMA3_ROPE = { factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 };

/**
 * Shapes. D embedding, F feed-forward, L layers, H heads, KV key/value heads, hd head size
 * (key_length), rot RoPE dimensions (default hd), ctx context_length, theta rope.freq_base, eps
 * norm epsilon, tied (no output.weight), vocab (VOCABS key), nVocab (pad to), window (gemma3),
 * origCtx (phi3). Tiny shapes: small dimensions, the real vocabulary, and each architecture's
 * peculiarities switched on (GQA; key_length ≠ D/H for qwen3/gemma3;
 * 6 layers for gemma3 so layer 5 is global and 0–4 use a window of 8 tokens, shorter than
 * the test prompts; separate output for qwen2 and phi3).
 */
export const SHAPES = Object.freeze({
  llama: {
    // tiny: Llama 3.2 style (llama-bpe vocabulary, tied, rope_freqs)
    tiny: { D: 64, F: 192, L: 2, H: 4, KV: 2, ctx: 4096, theta: 500000, eps: 1e-5, tied: true, vocab: 'llama3', ropeScaling: LLAMA3_ROPE },
    // SmolLM2 style (GPT-2 vocabulary, tied; llama.cpp refuses n_rot ≠ head size for llama)
    'smollm2-tiny': { D: 64, F: 192, L: 2, H: 4, KV: 2, ctx: 4096, theta: 100000, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // SmolVLM's text side (tools/synth_mmproj.mjs's idefics3-tiny pairs with it): smollm2-tiny
    // with SmolVLM's image tokens added to the vocabulary
    'smolvlm-tiny': { D: 64, F: 192, L: 2, H: 4, KV: 2, ctx: 4096, theta: 100000, eps: 1e-5, tied: true, vocab: 'smolvlm' },
    // huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/blob/main/config.json
    'smollm2-135m': { D: 576, F: 1536, L: 30, H: 9, KV: 3, ctx: 8192, theta: 100000, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // SmolVLM-256M-Instruct's text side (SmolLM2-135M with SmolVLM's image tokens; bench/images.mjs
    // pairs it with tools/synth_mmproj.mjs's idefics3-smolvlm-256m)
    'smolvlm-256m': { D: 576, F: 1536, L: 30, H: 9, KV: 3, ctx: 8192, theta: 100000, eps: 1e-5, tied: true, vocab: 'smolvlm' },
    // huggingface.co/HuggingFaceTB/SmolLM2-360M-Instruct/blob/main/config.json
    'smollm2-360m': { D: 960, F: 2560, L: 32, H: 15, KV: 5, ctx: 8192, theta: 100000, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // huggingface.co/meta-llama/Llama-3.2-1B-Instruct/blob/main/config.json
    'llama3.2-1b': { D: 2048, F: 8192, L: 16, H: 32, KV: 8, hd: 64, ctx: 131072, theta: 500000, eps: 1e-5, tied: true, vocab: 'llama3', nVocab: 128256, ropeScaling: LLAMA3_ROPE },
    // Llama-3.1-8B (memory64 benchmark: its Q4_K_M is 4.9 GB, past wasm32's 4 GB)
    'llama3.1-8b': { D: 4096, F: 14336, L: 32, H: 32, KV: 8, hd: 128, ctx: 131072, theta: 500000, eps: 1e-5, tied: false, vocab: 'llama3', nVocab: 128256, ropeScaling: LLAMA3_ROPE },
  },
  // SmolLM3 (llama.cpp's LLM_ARCH_SMOLLM3; archs-2026.md "smollm3"): Llama's tensors, NORM RoPE,
  // no RoPE on every 4th layer (3, 7, …; hard-coded, no key). tiny: 5 layers so layer 3 is NoPE
  // and layer 4 rotates again, GQA, tied, Llama 3.1's vocabulary (SmolLM3's is Llama 3's BPE with
  // its own special tokens, also 128256 entries).
  smollm3: {
    tiny: { D: 64, F: 192, L: 5, H: 4, KV: 2, ctx: 4096, theta: 5e6, eps: 1e-6, tied: true, vocab: 'llama3' },
    // huggingface.co/HuggingFaceTB/SmolLM3-3B/blob/main/config.json
    'smollm3-3b': { D: 2048, F: 11008, L: 36, H: 16, KV: 4, ctx: 65536, theta: 5e6, eps: 1e-6, tied: true, vocab: 'llama3', nVocab: 128256 },
  },
  qwen2: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen' },
    // huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/config.json
    'qwen2.5-0.5b': { D: 896, F: 4864, L: 24, H: 14, KV: 2, ctx: 32768, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151936 },
  },
  qwen2vl: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', sections: [2, 2, 2, 2] },
    // huggingface.co/Qwen/Qwen2.5-VL-3B-Instruct/blob/main/config.json
    'qwen2.5-vl-3b': { D: 2048, F: 11008, L: 36, H: 16, KV: 2, ctx: 128000, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151936, sections: [16, 24, 24, 0] },
  },
  qwen3: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen' },
    // the dense twin of qwen3moe's qwen3-30b-a3b-l6: the same attention, vocabulary and layers,
    // a feed-forward of 8 × 768 = the 8 active experts' rows (the same active weight bytes but the
    // F32 router's 1 MB a layer), for MoE decode against dense decode of the same bytes
    // gpt-oss-20b-l2's dense twin: its attention (with q width 4096 and biases, but no sinks,
    // windows or YaRN: qwen3 has none) and a feed-forward of 4 × 2880, the 4 active experts'
    'gpt-oss-20b-dense-l2': { D: 2880, F: 11520, L: 2, H: 64, KV: 8, hd: 64, ctx: 131072, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', nVocab: 201088 },
    'qwen3-a3b-dense-l6': { D: 2048, F: 6144, L: 6, H: 32, KV: 4, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', nVocab: 151936 },
    // huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json
    'qwen3-0.6b': { D: 1024, F: 3072, L: 28, H: 16, KV: 8, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151936 },
    // Qwen3-Embedding: qwen3 with last-token pooling (qwen3.pooling_type 3)
    'embedding-tiny': { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', pooling: 3 },
    // Qwen3-Reranker as llama.cpp's converter writes it: rank pooling (4), cls.output [D, 2] (the
    // lm_head rows of "yes" and "no"), classifier.output_labels, tokenizer.chat_template.rerank
    'rerank-tiny': { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', pooling: 4, rankLabels: ['yes', 'no'] },
    // huggingface.co/Qwen/Qwen3-Embedding-0.6B/blob/main/config.json
    'qwen3-embedding-0.6b': { D: 1024, F: 3072, L: 28, H: 16, KV: 8, hd: 128, ctx: 32768, theta: 1e6, eps: 1e-6, tied: true, vocab: 'qwen', nVocab: 151669, pooling: 3 },
  },
  // Qwen3 MoE: qwen3's attention, every feed-forward a mixture of E experts of width Fe, K used
  // (F is the dense feed_forward_length the file states and llama.cpp does not use). tiny: 6
  // experts, 2 used, the router scaled so that the choice changes from token to token (not 8
  // experts: llama.cpp's quantizer has Mixtral rules for exactly 8).
  qwen3moe: {
    tiny: { D: 64, F: 160, L: 2, H: 4, KV: 2, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', E: 6, K: 2, Fe: 32 },
    // huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json (archs-2026.md, qwen3moe)
    'qwen3-30b-a3b': { D: 2048, F: 6144, L: 48, H: 32, KV: 4, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', nVocab: 151936, E: 128, K: 8, Fe: 768 },
    // its first 6 layers (an eighth of the experts; Q4_K_M ~2.6 GB, inside wasm32's 4 GB where
    // the whole model's ~18 GB is not): decode per layer is the published model's
    // rows of 256 (whole K-quant blocks, unlike tiny's 64) and GPT-2's 50257-token vocabulary:
    // the random-code fixtures' check of every K-quant layout (tests/js/big_models.test.mjs)
    'tiny-k': { D: 256, F: 512, L: 2, H: 4, KV: 2, hd: 64, ctx: 4096, theta: 1e6, eps: 1e-6, tied: false, vocab: 'gpt2', E: 4, K: 2, Fe: 256 },
    'qwen3-30b-a3b-l6': { D: 2048, F: 6144, L: 6, H: 32, KV: 4, hd: 128, ctx: 40960, theta: 1e6, eps: 1e-6, tied: false, vocab: 'qwen', nVocab: 151936, E: 128, K: 8, Fe: 768 },
  },
  // Encoders (describeEncoder): pooling is <arch>.pooling_type (1 mean, 2 cls, 4 rank)
  bert: {
    tiny: { D: 64, F: 256, L: 2, H: 4, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 1 },
    // a cross-encoder reranker: cls (dim × dim) and cls.output (one label)
    'rerank-tiny': { D: 64, F: 256, L: 2, H: 4, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 4, rank: 1 },
    // huggingface.co/sentence-transformers/all-MiniLM-L6-v2/blob/main/config.json (mean pooling)
    'minilm-l6': { D: 384, F: 1536, L: 6, H: 12, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 1 },
    // huggingface.co/BAAI/bge-small-en-v1.5/blob/main/config.json (CLS pooling)
    'bge-small': { D: 384, F: 1536, L: 12, H: 12, ctx: 512, eps: 1e-12, vocab: 'bert', pooling: 2 },
  },
  // EmbeddingGemma (describeGemmaEmbedding): window 8 so that its symmetric window (± 4) masks
  // in the test texts; dense: d2 of the Dense modules
  'gemma-embedding': {
    tiny: { D: 64, F: 128, L: 6, H: 4, KV: 1, hd: 32, ctx: 2048, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 8, pooling: 1, dense: 256 },
    // huggingface.co/google/embeddinggemma-300m/blob/main/config.json (+ its 2_Dense, 3_Dense)
    'embeddinggemma-300m': { D: 768, F: 1152, L: 24, H: 3, KV: 1, hd: 256, ctx: 2048, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 512, pooling: 1, dense: 3072 },
  },
  'nomic-bert': {
    tiny: { D: 64, F: 192, L: 2, H: 4, ctx: 2048, theta: 1000, eps: 1e-12, vocab: 'bert', pooling: 1 },
  },
  gemma3: {
    tiny: { D: 64, F: 128, L: 6, H: 4, KV: 1, hd: 32, ctx: 4096, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 8 },
    // huggingface.co/google/gemma-3-1b-it/blob/main/config.json
    'gemma3-1b': { D: 1152, F: 6912, L: 26, H: 4, KV: 1, hd: 256, ctx: 32768, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 512 },
    // huggingface.co/google/gemma-3-4b-it/blob/main/config.json (text_config; bench/images.mjs pairs
    // it with tools/synth_mmproj.mjs's gemma3-4b)
    'gemma3-4b': { D: 2560, F: 10240, L: 34, H: 8, KV: 4, hd: 256, ctx: 131072, theta: 1e6, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 1024 },
  },
  phi3: {
    tiny: { D: 64, F: 128, L: 2, H: 4, KV: 4, ctx: 8192, origCtx: 4096, theta: 10000, eps: 1e-5, tied: false, vocab: 'phi3', window: 2047 },
    // huggingface.co/microsoft/Phi-3.5-mini-instruct/blob/main/config.json (the long/short
    // factor values here are synthetic; their count, hd/2 = 48, is the published one)
    'phi3.5-mini': { D: 3072, F: 8192, L: 32, H: 32, KV: 32, ctx: 131072, origCtx: 4096, theta: 10000, eps: 1e-5, tied: false, vocab: 'phi3', window: 262144 },
  },
  // Qwen3.5 (hybrid): S ssm.state_size, HK ssm.group_count, HV ssm.time_step_rank, K
  // ssm.conv_kernel, interval full_attention_interval or recurrent (attention.recurrent_layers),
  // sections rope.dimension_sections. tiny: both block kinds (DeltaNet at 0 and 2, attention at 1
  // and 3), head size 32 ≠ D/H, a quarter of each head rotated (8 of 32) with sections that give
  // every rotated pair the text position, HV = 2·HK (value head j reads key head j mod HK),
  // tied. tiny-untied: an output.weight, the kinds from an irregular recurrent_layers (attention
  // at 1 and 4, where the default interval would put it at 3), HV = HK.
  qwen35: {
    tiny: { D: 64, F: 160, L: 4, H: 4, KV: 2, hd: 32, rot: 8, sections: [2, 1, 1, 0], ctx: 4096, theta: 1e7, eps: 1e-6, tied: true, vocab: 'qwen35', K: 4, S: 16, HK: 2, HV: 4, interval: 2 },
    'tiny-untied': { D: 64, F: 160, L: 5, H: 4, KV: 2, hd: 32, rot: 8, sections: [2, 1, 1, 0], ctx: 4096, theta: 1e7, eps: 1e-6, tied: false, vocab: 'qwen35', K: 4, S: 16, HK: 4, HV: 4, recurrent: [true, false, true, true, false] },
    // Qwen3.5-0.8B, text part (../shared/reference/archs-2026.md §1.5)
    'qwen3.5-0.8b': { D: 1024, F: 3584, L: 24, H: 8, KV: 2, hd: 256, rot: 64, sections: [11, 11, 10, 0], ctx: 262144, theta: 1e7, eps: 1e-6, tied: true, vocab: 'qwen35', nVocab: 248320, K: 4, S: 128, HK: 16, HV: 16, interval: 4 },
    // Qwen3.5-2B (n_ff and heads from llama.cpp's size table, archs-2026.md §1.5)
    'qwen3.5-2b': { D: 2048, F: 6144, L: 24, H: 8, KV: 2, hd: 256, rot: 64, sections: [11, 11, 10, 0], ctx: 262144, theta: 1e7, eps: 1e-6, tied: true, vocab: 'qwen35', nVocab: 248320, K: 4, S: 128, HK: 16, HV: 16, interval: 4 },
  },
  // LFM2 / LFM2.5 (hybrid): kv, attention.head_count_kv per block (0: a short-conv block); Lc
  // shortconv.l_cache. tiny: conv blocks 0, 1, 3, 5 and attention at 2 and 4 (H·hd = D, GQA),
  // tied (token_embd_norm is the final norm). tiny-untied: an output.weight, attention first
  // (blocks 0 and 3).
  lfm2: {
    tiny: { D: 64, F: 192, L: 6, H: 4, kv: [0, 0, 2, 0, 2, 0], ctx: 4096, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3 },
    'vl-tiny': { D: 64, F: 192, L: 6, H: 4, kv: [0, 0, 2, 0, 2, 0], ctx: 8192, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2vl', Lc: 3 },
    'tiny-untied': { D: 64, F: 192, L: 5, H: 4, kv: [2, 0, 0, 2, 0], ctx: 4096, theta: 1e6, eps: 1e-5, tied: false, vocab: 'lfm2', Lc: 3 },
    // LFM2.5-1.2B (archs-2026.md §2.5; attention at blocks 2 5 8 10 12 14)
    'lfm2.5-1.2b': { D: 2048, F: 8192, L: 16, H: 32, kv: [0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3 },
    // LFM2-350M / LFM2.5-350M (archs-2026.md §2.5)
    'lfm2-350m': { D: 1024, F: 4608, L: 16, H: 16, kv: [0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3 },
  },
  // LFM2-MoE (describeLfm2 with experts): lfm2's layers; from `dense` on, mixtures of E experts
  // of width Fe, K used, sigmoid scores (expert_gating_func 2) with exp_probs_b. tiny: conv and
  // attention blocks both MoE and dense (block 0 dense), untied.
  lfm2moe: {
    tiny: { D: 64, F: 192, L: 4, H: 4, kv: [0, 2, 0, 2], ctx: 4096, theta: 1e6, eps: 1e-5, tied: false, vocab: 'lfm2', Lc: 3, E: 6, K: 2, Fe: 32, dense: 1 },
    // LFM2-8B-A1B (Liquid's blog and Lfm2MoeConfig: 24 layers, 6 attention, 32 experts × 1792,
    // top 4, the first two dense of 7168; the attention blocks' places are this file's choice);
    // Llama 3.1's vocabulary (LFM2's 65536 has no npm package)
    // its first 8 blocks (2 dense, 6 MoE; attention at 2 and 6), for benchmarks inside wasm32
    'lfm2-8b-a1b-l8': { D: 2048, F: 7168, L: 8, H: 32, kv: [0, 0, 8, 0, 0, 0, 8, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3, E: 32, K: 4, Fe: 1792, dense: 2 },
    'lfm2-8b-a1b': { D: 2048, F: 7168, L: 24, H: 32, kv: [0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 8, 0, 0], ctx: 128000, theta: 1e6, eps: 1e-5, tied: true, vocab: 'lfm2', Lc: 3, E: 32, K: 4, Fe: 1792, dense: 2 },
  },
  // gpt-oss (describeGptOss): H·hd ≠ D, Q/K/V/O biases, sinks, windows of `window` on even
  // blocks, YaRN ×factor from origCtx, E experts of Fe with biases, K used. tiny: window 8
  // (shorter than the test prompts), 4 blocks.
  'gpt-oss': {
    tiny: { D: 64, F: 64, L: 4, H: 4, KV: 2, hd: 32, ctx: 4096, origCtx: 4096, factor: 32, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', window: 8, E: 6, K: 2, Fe: 64 },
    // gpt-oss-20b (archs-2026.md); --type MXFP4_MOE gives the published layout (experts MXFP4,
    // the other matrices Q8_0, vectors and routers F32: 12.1 GB, as gpt-oss-20b-mxfp4.gguf);
    // the first 2 of 24 blocks for benchmarks (the whole model's Q8_0 is ~22 GB)
    'gpt-oss-20b': { D: 2880, F: 2880, L: 24, H: 64, KV: 8, hd: 64, ctx: 131072, origCtx: 4096, factor: 32, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', nVocab: 201088, window: 128, E: 32, K: 4, Fe: 2880 },
    'gpt-oss-20b-l2': { D: 2880, F: 2880, L: 2, H: 64, KV: 8, hd: 64, ctx: 131072, origCtx: 4096, factor: 32, theta: 150000, eps: 1e-5, tied: false, vocab: 'gptoss', nVocab: 201088, window: 128, E: 32, K: 4, Fe: 2880 },
  },
  // Gemma 4 (dense; describeGemma4): swa, one flag per block (true: sliding, head hdSwa, RoPE
  // rotSwa with thetaSwa); full blocks head hd with proportional RoPE (rope_freqs: the first
  // partial·hd/2 pairs turn); F and kv per block; shared, the last blocks reading an earlier
  // block's KV cache; vEqK, full blocks without attn_v (V = K); P, the per-layer-embedding width;
  // outScale, a layer_output_scale on every block. tiny: 8 blocks, sliding 16-wide heads and
  // full 32-wide ones, KV heads 2 or 1, n_ff 96..192, blocks 6 (sliding) and 7 (full) reading
  // the caches of 4 and 5, block 5 V = K, P 16, window 8, three suppressed tokens (greedy
  // choices of the model without them); the llama SPM vocabulary (32000: the tokenizer is not
  // under test here; tools/oracle_tokenize.mjs checks the gemma4 tokenizer model).
  gemma4: {
    tiny: { D: 64, F: [96, 96, 128, 128, 160, 160, 192, 192], L: 8, H: 4, kv: [2, 2, 1, 2, 2, 1, 2, 1], hd: 32, hdSwa: 16, rotSwa: 16, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 8, swa: [true, true, false, true, true, false, true, false], shared: 2, vEqK: true, P: 16, outScale: true, softcap: 30, suppress: [16031, 13844, 25886] },
    // tiny-e2b: the other layer pattern (E2B's kind): every block its own attn_v (no V = K),
    // E2B's heads (512-wide full with 64 of 256 pairs turning, 256-wide sliding: the WebGPU
    // attention kernel's wide form), one KV head, the last three blocks KV-shared
    // (3 and 4 sliding reading block 1's cache, 5 full reading block 2's), n_ff doubled on the
    // shared blocks, P 8, window 4 (the WebGPU backend's tests: tests/js/webgpu_gemma4.test.mjs)
    'tiny-e2b': { D: 64, F: [96, 96, 96, 192, 192, 192], L: 6, H: 2, kv: [1, 1, 1, 1, 1, 1], hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 4, swa: [true, true, false, true, true, false], shared: 3, vEqK: false, P: 8, outScale: true, softcap: 30 },
    // Gemma 4 E2B, text part (../shared/reference/archs-2026.md "gemma4"): 35 blocks, full
    // every 5th (4, 9, …, 34), 20 KV-shared, n_ff doubled on blocks 15–34; the Gemma 3
    // vocabulary padded to 262144 (the real "gemma4" one has the same size)
    // tiny-moe: the 26B-A4B kind (archs-2026.md "gemma4", MoE layer): every block a mixture of
    // 6 experts (2 used, width 32, a fused ffn_gate_up_exps) beside its dense feed-forward, the
    // router's logits spread ~2 so the choice changes between tokens, ffn_down_exps.scale on
    // even blocks only, V = K and one KV head on the full blocks, no per-layer embeddings
    'tiny-moe': { D: 64, F: [96, 96, 128, 128], L: 4, H: 4, kv: [2, 2, 1, 2], hd: 32, hdSwa: 16, rotSwa: 16, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 8, swa: [true, true, false, true], shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 6, K: 2, Fe: 32, downScale: [true, false, true, false] },
    // tiny-moe with ffn_gate_exps + ffn_up_exps holding the fused tensor's values (its logits
    // must be tiny-moe's bits)
    'tiny-moe-split': { D: 64, F: [96, 96, 128, 128], L: 4, H: 4, kv: [2, 2, 1, 2], hd: 32, hdSwa: 16, rotSwa: 16, partial: 0.25, ctx: 4096, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'spm', window: 8, swa: [true, true, false, true], shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 6, K: 2, Fe: 32, downScale: [true, false, true, false], split: true },
    // Gemma 4 26B-A4B, text part (archs-2026.md "gemma4"; huggingface.co/google/gemma-4-26B-A4B):
    // 30 blocks, full every 6th (5, 11, …), 8 KV heads sliding / 2 full (V = K there), dense
    // n_ff 2112 beside 128 experts of 704, 8 used; its first 6 blocks (decode per block is the
    // published model's; the whole one, gemma4-26b-a4b, is ~17 GB at Q4_K_M)
    'gemma4-26b-a4b': { D: 2816, F: Array(30).fill(2112), L: 30, H: 16, kv: Array.from({ length: 30 }, (_, l) => (l % 6 === 5 ? 2 : 8)), hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 262144, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 1024, swa: Array.from({ length: 30 }, (_, l) => l % 6 !== 5), shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 128, K: 8, Fe: 704, downScale: Array(30).fill(true) },
    'gemma4-26b-a4b-l6': { D: 2816, F: Array(6).fill(2112), L: 6, H: 16, kv: [8, 8, 8, 8, 8, 2], hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 262144, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 1024, swa: [true, true, true, true, true, false], shared: 0, vEqK: true, P: 0, outScale: true, softcap: 30, E: 128, K: 8, Fe: 704, downScale: Array(6).fill(true) },
    'gemma4-e2b': { D: 1536, F: Array.from({ length: 35 }, (_, l) => (l < 15 ? 6144 : 12288)), L: 35, H: 8, kv: Array(35).fill(1), hd: 512, hdSwa: 256, rotSwa: 256, partial: 0.25, ctx: 131072, theta: 1e6, thetaSwa: 1e4, eps: 1e-6, tied: true, vocab: 'gemma3', nVocab: 262144, window: 512, swa: Array.from({ length: 35 }, (_, l) => l % 5 !== 4), shared: 20, vEqK: false, P: 256, outScale: true, softcap: 30 },
  },
  gpt2: {
    tiny: { D: 64, F: 256, L: 2, H: 4, ctx: 512, eps: 1e-5, tied: true, vocab: 'gpt2' },
    // huggingface.co/openai-community/gpt2/blob/main/config.json
    gpt2: { D: 768, F: 3072, L: 12, H: 12, ctx: 1024, eps: 1e-5, tied: true, vocab: 'gpt2' },
  },
});

/** Resolves `arch` + shape name into the full hyperparameters (shape fields plus defaults). */
export function resolveShape(arch, shape = 'tiny') {
  const table = SHAPES[arch];
  if (!table) throw new Error(`unknown architecture ${arch} (one of ${[...ARCHS, ...EMBED_ARCHS].join(', ')})`);
  const s = table[shape];
  if (!s) throw new Error(`unknown shape ${shape} for ${arch} (one of ${Object.keys(table).join(', ')})`);
  const KV = s.KV ?? (s.kv ? Math.max(...s.kv) : s.H);
  if (Array.isArray(s.F)) return { ...s, KV, hd: s.hd, rot: s.rot ?? s.hd };
  const hd = s.hd ?? s.D / s.H;
  return { ...s, KV, hd, rot: s.rot ?? hd };
}
