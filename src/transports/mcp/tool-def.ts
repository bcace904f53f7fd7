/** The shape of one `sbx mcp` tool (tools.ts, process-tools.ts hold the table). */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import type { Client } from '../../client/client.js';
import type { Json } from './values.js';

/** What every tool gets besides its arguments: the client acting as the caller, and the result maker. */
export interface ToolContext {
  client: Client;
  /** A result: the value as JSON text; with `text`, that text instead and the value as structuredContent too. */
  ok(value: Json, text?: string): CallToolResult;
}

export interface ToolMeta {
  title: string;
  description: string;
  readOnly?: boolean;
  destructive?: boolean;
}

export interface ToolDef {
  name: string;
  meta: ToolMeta;
  shape: z.ZodRawShape;
  run(args: Record<string, unknown>, signal: AbortSignal, ctx: ToolContext): Promise<CallToolResult>;
}

/** One table entry, typed by its own schema. */
export function defineTool<S extends z.ZodRawShape>(
  name: string,
  meta: ToolMeta,
  shape: S,
  run: (args: z.infer<z.ZodObject<S>>, signal: AbortSignal, ctx: ToolContext) => Promise<CallToolResult>,
): ToolDef {
  return { name, meta, shape, run: run as ToolDef['run'] };
}
