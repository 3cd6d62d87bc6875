/**
 * RunState: every activation buffer of the forward pass, allocated once for
 * up to `maxRows` tokens at a time (the prompt in prefill, 1 in decode), as
 * llama2.c's RunState is. `rows(n)` gives tensor views of the first n rows;
 * the views for each n are made once and reused, so a decode step allocates
 * nothing. For n = 1 the matrix operands are 1-D, so `linear` does matvecs.
 */
import { Tensor } from '@sparq/core';
import type { ModelConfig } from './config.ts';

/** Views of the first n rows of the RunState buffers. */
export interface Rows {
  n: number;
  x: Tensor<'f32'>; // (n, dim) residual stream
  xb: Tensor<'f32'>; // (n, dim) normed input to a block
  xbIn: Tensor<'f32'>; // xb as a matrix operand: (n, dim), or (dim) when n = 1
  q: Tensor<'f32'>; // matmul output (n, q_dim) or (q_dim)
  k: Tensor<'f32'>; // (n, kv_dim) or (kv_dim)
  v: Tensor<'f32'>; // (n, kv_dim) or (kv_dim)
  qHeads: Tensor<'f32'>; // q as (n, n_heads, head_dim), for rope and attention
  kHeads: Tensor<'f32'>; // k as (n, n_kv_heads, head_dim)
  qRows: Tensor<'f32'>; // q as (n * n_heads, head_dim), for per-head norms
  kRows: Tensor<'f32'>; // k as (n * n_kv_heads, head_dim)
  vHeads: Tensor<'f32'>; // v as (n, n_kv_heads, head_dim)
  att: Tensor<'f32'>; // (n, n_heads, head_dim) attention output
  attIn: Tensor<'f32'>; // att as a matrix operand: (n, q_dim) or (q_dim)
  xb2: Tensor<'f32'>; // (n, dim) or (dim): output of wo and w2
  xb2Rows: Tensor<'f32'>; // xb2 as (n, dim), x's shape, for the residual add
  hb: Tensor<'f32'>; // (n, hidden_dim) or (hidden_dim): w1 output, then the SwiGLU product
  hb2: Tensor<'f32'>; // (n, hidden_dim) or (hidden_dim): w3 output
  positions: Tensor<'i32'>; // (n) positions of the rows
}

export class RunState {
  readonly x: Float32Array; // (maxRows, dim)
  readonly xb: Float32Array; // (maxRows, dim)
  readonly xb2: Float32Array; // (maxRows, dim)
  readonly q: Float32Array; // (maxRows, q_dim)
  readonly k: Float32Array; // (maxRows, kv_dim)
  readonly v: Float32Array; // (maxRows, kv_dim)
  readonly att: Float32Array; // (maxRows, q_dim)
  readonly hb: Float32Array; // (maxRows, hidden_dim)
  readonly hb2: Float32Array; // (maxRows, hidden_dim)
  readonly positions: Int32Array; // (maxRows)
  private readonly views = new Map<number, Rows>();

  readonly config: ModelConfig;
  readonly maxRows: number;

  constructor(config: ModelConfig, maxRows: number) {
    this.config = config;
    this.maxRows = maxRows;
    const { dim, qDim, kvDim, hiddenDim } = config;
    this.x = new Float32Array(maxRows * dim);
    this.xb = new Float32Array(maxRows * dim);
    this.xb2 = new Float32Array(maxRows * dim);
    this.q = new Float32Array(maxRows * qDim);
    this.k = new Float32Array(maxRows * kvDim);
    this.v = new Float32Array(maxRows * kvDim);
    this.att = new Float32Array(maxRows * qDim);
    this.hb = new Float32Array(maxRows * hiddenDim);
    this.hb2 = new Float32Array(maxRows * hiddenDim);
    this.positions = new Int32Array(maxRows);
  }

  /** Views of the first n rows (1 <= n <= maxRows), made once per n. */
  rows(n: number): Rows {
    let r = this.views.get(n);
    if (r) return r;
    const { dim, qDim, kvDim, hiddenDim, nHeads, nKvHeads, headDim } = this.config;
    // A matrix operand: (n, width), or (width) for a single row so linear() does a matvec.
    const mat = (data: Float32Array, width: number) => new Tensor('f32', data, n === 1 ? [width] : [n, width]);
    r = {
      n,
      x: new Tensor('f32', this.x, [n, dim]),
      xb: new Tensor('f32', this.xb, [n, dim]),
      xbIn: mat(this.xb, dim),
      q: mat(this.q, qDim),
      k: mat(this.k, kvDim),
      v: mat(this.v, kvDim),
      qHeads: new Tensor('f32', this.q, [n, nHeads, headDim]),
      kHeads: new Tensor('f32', this.k, [n, nKvHeads, headDim]),
      vHeads: new Tensor('f32', this.v, [n, nKvHeads, headDim]),
      qRows: new Tensor('f32', this.q, [n * nHeads, headDim]),
      kRows: new Tensor('f32', this.k, [n * nKvHeads, headDim]),
      att: new Tensor('f32', this.att, [n, nHeads, headDim]),
      attIn: mat(this.att, qDim),
      xb2: mat(this.xb2, dim),
      xb2Rows: new Tensor('f32', this.xb2, [n, dim]),
      hb: mat(this.hb, hiddenDim),
      hb2: mat(this.hb2, hiddenDim),
      positions: new Tensor('i32', this.positions, [n]),
    };
    this.views.set(n, r);
    return r;
  }
}
