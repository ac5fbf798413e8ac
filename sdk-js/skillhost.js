// The skillhost JavaScript SDK: tool definitions with their JSON schema, ToolResult, and
// typed wrappers over the host's imports. `skillhost skill build` puts this file beside the
// skill's entry module as `./skillhost.js`; a skill imports it from there:
//
//   import { tool, string, optional, integer, ToolResult, log } from "./skillhost.js";
//
//   export const tools = [
//     tool({
//       name: "hello",
//       description: "Greets someone.",
//       input: { name: string("Who to greet."), times: optional(integer("How often.", { minimum: 1 })) },
//       run({ name, times = 1 }, ctx) { return { greeting: `hello ${name}`.repeat(times) }; },
//     }),
//   ];
//
// Hooks are exported functions of the entry module, found by name at build time:
// resolveHuman, isAvailable, startup, scheduled (every `[schedule] every` of skill.toml while
// `skillhost run` serves), beforeMcpCall, observeMcpResult, toolResultEmpty, toolTarget,
// requiredClientCapabilities (`{ tool: ["sampling" | "elicitation" | "roots"] }`: what an MCP
// client must offer for those tools to run), taskSupport (`{ tool: "optional" | "required" |
// "detaches" | "may_detach" }`: the tools that run as MCP tasks; see `tasks.detach`). Facts about the skill are an exported `info` object
// ({ mcpTools: [{ server, tools }], mcpServers, mcpPrerequisites, verify }).
// `isAvailable(config)` and `startup(config)` receive the skill's config block; credentials
// are in `env`: exactly the variables skill.toml names ([capabilities] env) and the operator
// grants (skills.grants.<skill>.env).
// Files: `[capabilities] files = "self"` mounts the skill's own distributable files read-only
// at /skill for Rust and Python components; componentize-js gives JavaScript no file API, so
// a JS skill carries its data in its modules instead.

import * as rawLog from "skillhost:skill/log@0.1.0";
import * as rawMemory from "skillhost:skill/memory@0.1.0";
import * as rawState from "skillhost:skill/state@0.1.0";
import * as rawHttp from "skillhost:skill/http@0.1.0";
import * as rawMcp from "skillhost:skill/mcp@0.1.0";
import * as rawRoute from "skillhost:skill/route@0.1.0";
import * as rawProgress from "skillhost:skill/progress@0.1.0";
import * as rawNotify from "skillhost:skill/notify@0.1.0";
import * as rawAsk from "skillhost:skill/ask@0.1.0";
import * as rawLists from "skillhost:skill/lists@0.1.0";
import * as rawTasks from "skillhost:skill/tasks@0.1.0";
import { getEnvironment } from "wasi:cli/environment@0.2.10";

const OPTIONAL = Symbol("optional");

/** A string parameter. `extra` holds more JSON Schema keywords (`enum`, `maxLength`, ...). */
export const string = (description, extra = {}) => ({ type: "string", description, ...extra });
/** An integer parameter. */
export const integer = (description, extra = {}) => ({ type: "integer", description, ...extra });
/** A number parameter. */
export const number = (description, extra = {}) => ({ type: "number", description, ...extra });
/** A boolean parameter. */
export const boolean = (description, extra = {}) => ({ type: "boolean", description, ...extra });
/** An array parameter whose items follow `items`. */
export const array = (items, description, extra = {}) => ({ type: "array", items, description, ...extra });
/** An object parameter with the given properties (all required unless `optional`). */
export const object = (properties, description, extra = {}) => ({ ...objectSchema(properties), description, ...extra });
/** Marks a parameter as not required. */
export const optional = (schema) => ({ ...schema, [OPTIONAL]: true });

function objectSchema(properties) {
  const required = Object.keys(properties).filter((k) => !properties[k][OPTIONAL]);
  const clean = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, strip(v)]));
  return required.length ? { type: "object", properties: clean, required } : { type: "object", properties: clean };
}

function strip(schema) {
  const out = {};
  for (const [k, v] of Object.entries(schema)) if (v !== undefined) out[k] = v;
  return out;
}

const APPROVALS = ["none", "approve", "confirm", "dynamic"];

/**
 * Declares a tool: `name`, `description`, `input` (parameter name -> schema, from the helpers
 * above) or a whole JSON `schema`, `run(input, ctx)`, and optionally `approval`
 * ("none", "approve", "confirm", "dynamic"), `exposeResult`, `declaresCoverage`,
 * `outputSchema` (a JSON object schema of the structured result) and the MCP hints `title`,
 * `readOnly`, `destructive`, `idempotent`, `openWorld`.
 */
export function tool(def) {
  for (const key of ["name", "description", "run"]) {
    if (!def[key]) throw new TypeError(`tool ${def.name ?? "?"}: "${key}" is required`);
  }
  const approval = def.approval ?? "none";
  if (!APPROVALS.includes(approval)) throw new TypeError(`tool ${def.name}: approval must be one of ${APPROVALS.join(", ")}`);
  const schema = def.schema ?? objectSchema(def.input ?? {});
  return { ...def, approval, schema };
}

/**
 * A tool's result when a plain value is not enough. `blocks` is typed content after the
 * text: strings, `json(value)`, `image(mimeType, bytes)`, `resourceLink(uri, name)`.
 */
export class ToolResult {
  constructor(content, { succeeded = true, isEmpty, coverage, blocks = [] } = {}) {
    Object.assign(this, { content, succeeded, isEmpty, coverage, blocks });
  }
  /** A successful result. */
  static ok(content, options = {}) {
    return new ToolResult(content, { ...options, succeeded: true });
  }
  /** A failed result the model reads as `{"error": message, ...details}`. */
  static error(message, details = {}) {
    return new ToolResult({ error: message, ...details }, { succeeded: false });
  }
}

/** A JSON block: MCP clients also get it as `structuredContent` under an `outputSchema`. */
export const json = (value) => ({ tag: "json", val: JSON.stringify(value) });
/** An image block (`bytes`: a Uint8Array); the model reads a placeholder. */
export const image = (mimeType, bytes) => ({ tag: "image", val: { mimeType, data: bytes } });
/** A link to a resource the client may read. */
export const resourceLink = (uri, name, { mimeType, description } = {}) =>
  ({ tag: "resource-link", val: { uri, name, mimeType, description } });

/**
 * Reports a long call's progress; an MCP client that sent a progress token hears it, for
 * everyone else it is a no-op. The host forwards at most one report every 50 ms.
 */
export function reportProgress(progress, total, message) {
  rawProgress.reportProgress(progress, total, message);
}

/** Throw from a tool for an application failure: the model reads `{"error": message}`. */
export class ToolError extends Error {}

/** A host import failed: `kind` is the WIT error case (`denied`, `invalid-path`, ...). */
export class HostError extends Error {
  constructor(iface, payload) {
    const kind = payload?.tag ?? "other";
    const detail = payload?.val === undefined ? "" : String(payload.val);
    super(`${iface}: ${kind}${detail ? `: ${detail}` : ""}`);
    Object.assign(this, { iface, kind, detail });
  }
}

function host(iface, fn) {
  try {
    return fn();
  } catch (e) {
    throw new HostError(iface, e?.payload ?? e);
  }
}

const fields = (obj) => Object.entries(obj).map(([k, v]) => [k, String(v)]);

/** Structured logging to the host's log: `log.info("fetched", { url })`. */
export const log = {
  debug: (message, f = {}) => rawLog.log("debug", message, fields(f)),
  info: (message, f = {}) => rawLog.log("info", message, fields(f)),
  warn: (message, f = {}) => rawLog.log("warn", message, fields(f)),
  error: (message, f = {}) => rawLog.log("error", message, fields(f)),
};

/** Files under the operator's memory root (needs `memory = true` in skill.toml). */
export const memory = {
  read: (path) => host("memory", () => rawMemory.read(path)) ?? null,
  write: (path, content, { append = false } = {}) =>
    host("memory", () => rawMemory.write(path, content, append ? "append" : "overwrite")),
  readJson: (path) => {
    const text = host("memory", () => rawMemory.readJson(path));
    return text === undefined || text === null ? null : JSON.parse(text);
  },
  search: (query) => host("memory", () => rawMemory.search(query)),
};

/**
 * A persistent key-value store. By default the keys are the conversation's: every agent and
 * channel has its own, and a key expires `skills.state_ttl_seconds` (a day unless the operator
 * says otherwise) after its last get or set. With `[capabilities] state = "skill"` in
 * `skill.toml` the keys are the skill's own, shared by every conversation, and never expire.
 * `startup`, `scheduled` and `isAvailable` always see the skill's own keys.
 */
export const state = {
  get: (key) => host("state", () => rawState.get(key)) ?? null,
  set: (key, value) => host("state", () => rawState.set(key, value)),
  delete: (key) => host("state", () => rawState.delete(key)),
  keys: () => host("state", () => rawState.keys()),
  getJson: (key, fallback = null) => {
    const text = state.get(key);
    return text === null ? fallback : JSON.parse(text);
  },
  setJson: (key, value) => state.set(key, JSON.stringify(value)),
};

/** Outbound HTTP to hosts the manifest asks for and the operator grants. */
export const http = {
  fetch(method, url, { headers = {}, body, timeoutMs } = {}) {
    const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
    const r = host("http", () =>
      rawHttp.fetch({ method, url, headers: Object.entries(headers), body: bytes, timeoutMs }),
    );
    return {
      status: r.status,
      headers: r.headers,
      body: r.body,
      text: () => new TextDecoder().decode(r.body),
      json: () => JSON.parse(new TextDecoder().decode(r.body)),
    };
  },
  get: (url, options) => http.fetch("GET", url, options),
  post: (url, json, options = {}) =>
    http.fetch("POST", url, {
      ...options,
      body: JSON.stringify(json),
      headers: { "content-type": "application/json", ...(options.headers ?? {}) },
    }),
};

/** Calls a tool of an MCP server the skill declares; returns the result's text. */
export const mcp = {
  callTool: (server, tool, args = {}) => host("mcp", () => rawMcp.callTool(server, tool, JSON.stringify(args))),
};

/**
 * Asking whoever drives the call, mid-call, in one round: named requests under your own
 * keys, each answered (or found unavailable) under the same key.
 *
 *   const answers = ask.ask({ user: ask.form("What is your name?", schema), roots: ask.roots() });
 *   // answers.user: { kind: "form", action: "accept", content: { name: "Ada" } }
 *
 * An MCP client gets the requests as they are (elicitation, sampling, roots); a person in
 * chat or the API is asked each form; a turn's own model samples; `skillhost call` asks a
 * form on the terminal. What nobody there can answer is `{ kind: "unavailable", why }`. From
 * MCP 2026-07-28 a call that asks runs again from the start once the client answered, and
 * `ask` returns the recorded answers: do side effects after the question. A round with no
 * answers throws `HostError` (`timed-out`, `cancelled`, `invalid`).
 */
export const ask = {
  /** A form: `message`, answered to fit `schema` (an object schema, passed on untouched). */
  form: (message, schema) => ({ tag: "form", val: { message, schema: JSON.stringify(schema) } }),
  /** Sampling of `prompt` (or of `messages`: [role, text] pairs) by the caller's model. */
  sampling: (prompt, { maxTokens = 100, systemPrompt, messages } = {}) => ({
    tag: "sampling",
    val: {
      messages: (messages ?? [["user", prompt]]).map(([role, text]) => ({ role, text })),
      systemPrompt,
      maxTokens,
    },
  }),
  /** The MCP client's roots. */
  roots: () => ({ tag: "roots" }),
  /** Asks `requests` (key -> form, sampling or roots) in one round; the answers by key. */
  ask: (requests) => {
    const answers = host("ask", () => rawAsk.ask(Object.entries(requests)));
    return Object.fromEntries(answers.map(([key, answer]) => [key, described(answer)]));
  },
};

/**
 * Telling the host that a list of the skill changed while it serves: `lists.changed("tools")`
 * (or `"prompts"`, `"resources"`). The host describes the skill again and tells MCP clients;
 * a no-op where nothing serves (`skillhost call`).
 */
export const lists = {
  changed: (which) => {
    if (!["tools", "prompts", "resources"].includes(which)) throw new Error(`which list? ${which}`);
    rawLists.changed(which);
  },
};

/**
 * Going on as a task of the MCP Tasks extension: a tool that the exported `taskSupport()`
 * marks `"detaches"` gathers what it needs first, then calls `tasks.detach()`: the client gets
 * the task at once and the tool goes on in the background. `false` where the call cannot.
 */
export const tasks = {
  detach: () => rawTasks.detach(),
};

function described({ tag, val }) {
  switch (tag) {
    case "form":
      return { kind: "form", action: val.action, content: val.content === undefined ? undefined : JSON.parse(val.content) };
    case "sampled":
      return { kind: "sampled", text: val.text, model: val.model, stopReason: val.stopReason };
    case "roots":
      return { kind: "roots", roots: val.map(({ uri, name }) => ({ uri, name })) };
    default:
      return { kind: "unavailable", why: val };
  }
}

/**
 * Messages the skill sends on its own (`[capabilities] notify = true` in skill.toml, each
 * destination granted in `skills.grants.<skill>.notify`): `slack:<channel id>` or
 * `telegram:<chat id>`. `{ wake: true }` then has the agent run a turn on the message.
 */
export const notify = {
  send: (destination, text, { wake = false } = {}) => host("notify", () => rawNotify.send(destination, text, wake)),
};

/**
 * The environment variables granted to the skill (named in skill.toml's `[capabilities] env`
 * and granted in `skills.grants.<skill>.env`); nothing else is there.
 */
export const env = {
  get: (name) => getEnvironment().find(([k]) => k === name)?.[1] ?? null,
  all: () => Object.fromEntries(getEnvironment()),
};

/** The current turn's routing attributes. */
export const route = { setAttribute: (key, value) => rawRoute.setAttribute(key, value) };

// ---- The component's exports, built from the entry module (see the generated entry). ----

function context(ctx) {
  return {
    config: JSON.parse(ctx.config || "{}"),
    channelId: ctx.channelId,
    userId: ctx.userId ?? null,
    route: Object.fromEntries(ctx.route),
    userMessage: ctx.userMessage ?? null,
  };
}

function wireResult(value) {
  const r = value instanceof ToolResult ? value : new ToolResult(value);
  const content = typeof r.content === "string" ? r.content : JSON.stringify(r.content ?? null);
  const c = r.coverage;
  const coverage = c && {
    subject: c.subject,
    attemptedScope: c.attemptedScope && JSON.stringify(c.attemptedScope),
    coveredScope: c.coveredScope && JSON.stringify(c.coveredScope),
    status: c.status ?? "complete",
    resultState: c.resultState ?? "data",
  };
  const blocks = (r.blocks ?? []).map((b) => (typeof b === "string" ? { tag: "text", val: b } : b));
  return { content, succeeded: r.succeeded, isEmpty: r.isEmpty, coverage, blocks };
}

function where(err) {
  const line = String(err?.stack ?? "").split("\n").find((l) => l.includes(".js:"));
  return line ? line.replace(/^.*@/, "").trim() : undefined;
}

/** The component's exports for the skill's entry module `skill` (used by the generated entry). */
export function exportsOf(skill) {
  const defs = skill.tools ?? [];
  const info = skill.info ?? {};
  const out = {
    tools: {
      listTools: () =>
        defs.map((t) => ({
          name: t.name,
          description: t.description,
          inputSchema: JSON.stringify(t.schema),
          approval: t.approval,
          exposeResult: Boolean(t.exposeResult),
          declaresCoverage: Boolean(t.declaresCoverage),
          outputSchema: t.outputSchema && JSON.stringify(t.outputSchema),
          hints: {
            title: t.title,
            readOnly: t.readOnly,
            destructive: t.destructive,
            idempotent: t.idempotent,
            openWorld: t.openWorld,
          },
        })),
      handle(name, input, ctx) {
        const t = defs.find((d) => d.name === name);
        if (!t) return wireResult(ToolResult.error(`unknown tool: ${name}`));
        try {
          return wireResult(t.run(JSON.parse(input), context(ctx)));
        } catch (err) {
          if (err instanceof ToolError) return wireResult(ToolResult.error(err.message));
          log.error(`${name} threw ${err?.name ?? "an error"}`, { stack: String(err?.stack ?? err) });
          return wireResult(ToolResult.error(`${err?.name ?? "Error"}: ${err?.message ?? err}`, { at: where(err) }));
        }
      },
      info: () => ({
        mcpTools: (info.mcpTools ?? []).map((u) => ({ server: u.server, tools: u.tools ?? ["*"] })),
        mcpServers: info.mcpServers ?? [],
        mcpPrerequisites: info.mcpPrerequisites ?? [],
        verify: Boolean(info.verify),
      }),
    },
    resolveHuman: {
      resolveHuman(name, input, ctx) {
        const level = skill.resolveHuman(name, JSON.parse(input), context(ctx));
        return level === "approve" || level === "confirm" ? level : undefined;
      },
    },
    availability: {
      isAvailable(config) {
        const answer = skill.isAvailable(JSON.parse(config || "{}"));
        if (typeof answer !== "boolean") throw new TypeError(`isAvailable returned ${typeof answer}, not a boolean`);
        return answer;
      },
    },
    startup: {
      startup(config) {
        try {
          skill.startup(JSON.parse(config || "{}"));
        } catch (err) {
          throw `${err?.name ?? "Error"}: ${err?.message ?? err}`;
        }
      },
    },
    scheduled: {
      scheduled(config) {
        try {
          skill.scheduled(JSON.parse(config || "{}"));
        } catch (err) {
          throw `${err?.name ?? "Error"}: ${err?.message ?? err}`;
        }
      },
    },
    beforeMcpCall: {
      beforeMcpCall(server, tool, args, ctx) {
        const d = skill.beforeMcpCall(server, tool, JSON.parse(args), context(ctx)) ?? {};
        const dump = (v) => (v === undefined || v === null ? undefined : JSON.stringify(v));
        const kind =
          d.kind === "deny"
            ? { tag: "deny" }
            : d.kind === "prerequisite"
              ? { tag: "prerequisite", val: { tool: d.tool, arguments: JSON.stringify(d.arguments ?? {}) } }
              : { tag: "proceed" };
        return { kind, correctedArguments: dump(d.correctedArguments), correction: d.correction, context: dump(d.context) };
      },
    },
    observeMcpResult: {
      observeMcpResult(server, tool, args, output, ctx) {
        const r = skill.observeMcpResult(server, tool, JSON.parse(args), output, context(ctx));
        return typeof r === "string" ? r : undefined;
      },
    },
    toolResultEmpty: {
      toolResultEmpty(toolName, raw) {
        const r = skill.toolResultEmpty(toolName, raw);
        return typeof r === "boolean" ? r : undefined;
      },
    },
    toolTarget: {
      toolTarget(toolName, input) {
        const r = skill.toolTarget(toolName, JSON.parse(input));
        return r ? { target: r.target ?? undefined, queryKind: r.queryKind ?? undefined } : undefined;
      },
    },
    clientCapabilities: {
      required() {
        const needs = skill.requiredClientCapabilities() ?? {};
        return Object.entries(needs).map(([tool, caps]) => [tool, caps.map(String)]);
      },
    },
    taskSupport: {
      tools() {
        const kinds = {
          optional: ["optional", false],
          required: ["required", false],
          detaches: ["required", true],
          may_detach: ["optional", true],
        };
        return Object.entries(skill.taskSupport() ?? {}).map(([name, kind]) => {
          if (!(kind in kinds)) throw new Error(`taskSupport: tool ${name} is ${kind}; one of ${Object.keys(kinds)}`);
          const [support, detaches] = kinds[kind];
          return { name, support, detaches };
        });
      },
    },
  };
  return out;
}
