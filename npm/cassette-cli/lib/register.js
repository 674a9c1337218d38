// The Node preload (`node --import cassette-cli/register`; `cassette exec` and the vitest/jest
// helpers put it in NODE_OPTIONS): when CASSETTE_CHANNEL names the proxy's channel socket, every
// request of the process, fetch (Node's undici) and node:http/node:https alike, goes over that
// socket with its original URL, whatever base URL the client was given. The proxy alone decides
// (docs/proxy.md, "The channel"): a vendor's host is routed to its route and recorded or
// replayed, a host no route serves is refused (403 cassette_unrouted, counted for the running
// test), and a loopback or `[bypass] allow` host is answered 421 `x-cassette: direct`, upon
// which the request is sent as it would have been without cassette. Does nothing without
// CASSETTE_CHANNEL. Under the vitest and jest helpers, each request also names the worker's
// scope (`x-cassette-scope`), so the proxy counts it for the test that worker runs, and a child
// process started there carries that scope (`CASSETTE_SCOPE`) into its own preload. Once fetch
// is caught, the process's base-URL variables name the vendors and its children's the proxy
// (./env.cjs).
import http from "node:http";
import https from "node:https";
import { syncBuiltinESMExports } from "node:module";
import { EventEmitter } from "node:events";
import env from "./env.cjs";

/** The variable `cassette exec` sets to the channel's socket. */
export const CHANNEL_ENV = env.CHANNEL_ENV;

/** The header carrying the original URL of an origin-form request on the channel. */
const URL_HEADER = "x-cassette-url";

/** The header naming the scope (a worker's, under the test runner helpers) of a request. */
const SCOPE_HEADER = "x-cassette-scope";

/** Where the runner helpers leave the worker's scope (on node:http: ./env.cjs). */
export const SCOPE_SLOT = env.SCOPE_SLOT;

/** Marks node:http as wrapped, so that a second import installs nothing twice. */
const INSTALLED = Symbol.for("cassette-cli.registered");

/** The status and header value of the proxy's "send it yourself" answer. */
const DIRECT_STATUS = 421;
const DIRECT = "direct";

/** The origin requests on the channel are written for (plain HTTP over the socket). */
const CHANNEL_ORIGIN = "http://cassette.channel";

const socketPath = process.env[CHANNEL_ENV];

/** The proxy's verdict per `host:port` (`routed`, `direct` or `refused`), once asked. */
/** @type {Map<string, string>} */
const verdicts = new Map();

/**
 * Whether `url` is the proxy's own HTTP address (clients given a base URL): sent there as
 * asked. Other loopback hosts are asked about like any: `127.0.0.1:11434` is the ollama route.
 * @param {URL} url
 */
function isOwn(url) {
  const own = process.env.CASSETTE_PROXY_URL;
  if (!own) return false;
  try {
    return authority(new URL(own)) === authority(url);
  } catch {
    return false;
  }
}

/**
 * `host:port` of a URL, the key of its verdict.
 * @param {URL} url
 */
function authority(url) {
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return `${url.hostname}:${port}`;
}

/**
 * `headers` (an undici or node:http headers value) with the channel's own headers added.
 * @param {any} headers
 * @param {URL} url
 */
function channelHeaders(headers, url) {
  const withUrl = withHeader(headers, URL_HEADER, url.href);
  const id = env.scope();
  return id ? withHeader(withUrl, SCOPE_HEADER, id) : withUrl;
}


/**
 * Node's fetch reads its dispatcher from this global (undici's setGlobalDispatcher writes it),
 * in Node 18, 20 and 22 alike; no undici package is needed.
 * @param {string} socket
 * @param {(url: URL) => Promise<string>} probe
 * @returns {boolean} whether fetch is caught
 */
function installDispatcher(socket, probe) {
  const key = Symbol.for("undici.globalDispatcher.1");
  /** @type {Record<symbol, any>} */
  const global = /** @type {any} */ (globalThis);
  const original = global[key];
  if (!original || typeof original.dispatch !== "function") {
    process.emitWarning("cassette: Node's fetch has no global dispatcher here; fetch is not caught");
    return false;
  }
  const Agent = original.constructor;
  // Under `cassette exec` Node 22.21+ reads NODE_USE_ENV_PROXY, and its dispatcher is then an
  // EnvHttpProxyAgent: one made like it would send the channel's requests to HTTP_PROXY (a
  // tunnel to cassette.channel), so the proxy variables are overridden to none for it.
  const direct = Agent.name === "EnvHttpProxyAgent" ? { httpProxy: "", httpsProxy: "", noProxy: "" } : {};
  const channel = new Agent({ ...direct, connect: { socketPath: socket } });

  class CassetteDispatcher extends EventEmitter {
    /**
     * @param {any} opts
     * @param {any} handler
     */
    dispatch(opts, handler) {
      const url = new URL(String(opts.path ?? "/"), String(opts.origin));
      probe(url).then(
        (verdict) => {
          if (verdict === DIRECT) {
            original.dispatch(opts, handler);
            return;
          }
          channel.dispatch(
            { ...opts, origin: CHANNEL_ORIGIN, headers: channelHeaders(opts.headers, url) },
            handler,
          );
        },
        (/** @type {Error} */ error) => {
          const fail = handler.onError ?? handler.onResponseError;
          fail?.call(handler, channelError(error));
        },
      );
      return true;
    }

    /** @returns {Promise<void>} */
    close() {
      return Promise.all([channel.close(), original.close()]).then(() => {});
    }

    /** @param {Error} [error] */
    destroy(error) {
      return Promise.all([channel.destroy(error), original.destroy(error)]).then(() => {});
    }
  }
  global[key] = new CassetteDispatcher();
  return true;
}

/**
 * The headers of an undici request (an object, a flat array or absent) with one more.
 * @param {any} headers
 * @param {string} name
 * @param {string} value
 */
function withHeader(headers, name, value) {
  if (Array.isArray(headers)) {
    return [...headers, name, value];
  }
  if (headers && typeof headers[Symbol.iterator] === "function" && typeof headers !== "string") {
    return [...Array.from(headers, (/** @type {[string, string]} */ [k, v]) => [k, v]).flat(), name, value];
  }
  return { ...(headers ?? {}), [name]: value };
}

/** @param {Error} error */
function channelError(error) {
  return new Error(`cassette: cannot reach the proxy's channel at ${socketPath}: ${error.message}`, {
    cause: error,
  });
}

/**
 * The URL and options of a `request(url?, options?, callback?)` call.
 * @param {string} protocol the module's default
 * @param {any[]} args
 * @returns {{ url: URL | null, options: any, callback: any }}
 */
function parseArgs(protocol, args) {
  let [first, second, third] = args;
  /** @type {any} */
  let options = {};
  /** @type {URL | null} */
  let base = null;
  if (typeof first === "string" || first instanceof URL) {
    base = new URL(String(first));
    if (typeof second === "function") {
      third = second;
    } else if (second) {
      options = second;
    }
  } else {
    options = first ?? {};
    third = second;
  }
  if (options.socketPath) {
    return { url: null, options, callback: third };
  }
  const proto = options.protocol ?? base?.protocol ?? protocol;
  const host = options.hostname ?? (options.host ? String(options.host).replace(/:\d+$/, "") : null) ?? base?.hostname ?? "localhost";
  const port = options.port ?? base?.port ?? "";
  const path = options.path ?? (base ? `${base.pathname}${base.search}` : "/");
  const bracketed = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const url = new URL(`${proto}//${bracketed}${port ? `:${port}` : ""}${path}`);
  const merged = base ? { ...urlOptions(base), ...options } : options;
  return { url, options: merged, callback: third };
}

/** @param {URL} url */
function urlOptions(url) {
  return {
    protocol: url.protocol,
    hostname: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port || undefined,
    path: `${url.pathname}${url.search}`,
    ...(url.username ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` } : {}),
  };
}

/**
 * Replaces `request` and `get` of node:http or node:https with ones that send over the channel.
 * A request to a host whose verdict is not yet known goes over the channel with its body kept;
 * a 421 direct answer then sends it, body and all, as the caller asked, and the caller sees that
 * request's response and errors.
 * @param {typeof http | typeof https} mod
 * @param {string} protocol
 * @param {typeof http.request} originalHttpRequest
 * @param {string} socket
 */
function wrapHttp(mod, protocol, originalHttpRequest, socket) {
  const original = mod.request;

  /** @param {any[]} args */
  function request(...args) {
    const { url, options, callback } = parseArgs(protocol, args);
    if (!url || isOwn(url) || verdicts.get(authority(url)) === DIRECT) {
      return /** @type {any} */ (original)(...args);
    }
    const headers = channelHeaders({ ...(options.headers ?? {}) }, url);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === "host")) {
      headers.host = url.host;
    }
    const req = originalHttpRequest({
      method: options.method ?? "GET",
      path: `${url.pathname}${url.search}`,
      headers,
      socketPath: socket,
      agent: false,
      ...(options.timeout !== undefined ? { timeout: options.timeout } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (callback) {
      req.once("response", callback);
    }
    /** @type {any[][]} */
    const written = [];
    const write = req.write.bind(req);
    const end = req.end.bind(req);
    /** @type {any} */ (req).write = (/** @type {any[]} */ ...chunk) => {
      written.push(chunk);
      return /** @type {any} */ (write)(...chunk);
    };
    /** @type {any} */ (req).end = (/** @type {any[]} */ ...chunk) => {
      if (chunk.length > 0 && typeof chunk[0] !== "function") {
        written.push(chunk.filter((c) => typeof c !== "function"));
      }
      return /** @type {any} */ (end)(...chunk);
    };
    const emit = req.emit.bind(req);
    /** @type {any} */ (req).emit = (/** @type {string} */ event, /** @type {any[]} */ ...rest) => {
      const res = rest[0];
      if (event === "response" && res.statusCode === DIRECT_STATUS && res.headers["x-cassette"] === DIRECT) {
        verdicts.set(authority(/** @type {URL} */ (url)), DIRECT);
        res.resume();
        const direct = /** @type {any} */ (original)(...args.filter((a) => typeof a !== "function"));
        direct.on("response", (/** @type {any} */ r) => emit("response", r));
        direct.on("error", (/** @type {Error} */ e) => emit("error", e));
        for (const chunk of written) {
          direct.write(...chunk);
        }
        direct.end();
        return true;
      }
      return emit(event, ...rest);
    };
    return req;
  }

  /** @param {any[]} args */
  function get(...args) {
    const req = request(...args);
    req.end();
    return req;
  }

  /** @type {any} */ (mod).request = request;
  /** @type {any} */ (mod).get = get;
}

// Last, once every function above is defined (a bundler that rewrites the imports, such as
// vitest running this file from source, may evaluate the module in its own order).
if (socketPath && !(/** @type {any} */ (http)[INSTALLED])) {
  /** @type {any} */ (http)[INSTALLED] = true;
  const originalHttpRequest = http.request;

  /**
   * Asks the proxy where a URL's requests go, without sending one (`x-cassette-probe`).
   * @param {URL} url
   * @returns {Promise<string>}
   */
  const probe = (url) => {
    const key = authority(url);
    const known = verdicts.get(key);
    if (known) {
      return Promise.resolve(known);
    }
    return new Promise((resolve, reject) => {
      const req = originalHttpRequest(
        {
          socketPath,
          method: "GET",
          path: "/",
          agent: false,
          headers: { host: url.host, [URL_HEADER]: url.href, "x-cassette-probe": "1" },
        },
        (res) => {
          res.resume();
          const verdict = String(res.headers["x-cassette"] ?? "refused");
          verdicts.set(key, verdict);
          resolve(verdict);
        },
      );
      req.on("error", reject);
      req.end();
    });
  };

  // Node loads its undici, which installs the default Agent there, on the first fetch; a
  // data: URL loads it without a connection.
  await fetch("data:,").then((r) => r.arrayBuffer());
  const fetchCaught = installDispatcher(socketPath, probe);
  wrapHttp(http, "http:", originalHttpRequest, socketPath);
  wrapHttp(https, "https:", originalHttpRequest, socketPath);
  env.wrapChildProcess();
  if (fetchCaught) {
    // Only now may a client follow a vendor's URL: every way out of the process is caught.
    env.caught();
    env.inProcess(process.env);
  }
  // `import { request } from "node:http"` (and node:child_process) sees the wrapped functions too.
  syncBuiltinESMExports();
}
