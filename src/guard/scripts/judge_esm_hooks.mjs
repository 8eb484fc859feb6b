// cbrun judge-time ESM resolve hook, registered by ban.js (see there).
import { writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

let ws = '/app';
let bans = [];

export async function initialize(data) {
  if (data) {
    ws = data.ws;
    bans = data.bans;
  }
}

function banned(spec) {
  const s = String(spec).toLowerCase().replace(/^node:/, '');
  for (const b of bans) {
    if (s === b || s.startsWith(b + '/')) return b;
  }
  return null;
}

function agentFile(f) {
  if (typeof f !== 'string') return false;
  if (f !== ws && !f.startsWith(ws + '/')) return false;
  // `node -e` / stdin code gets a file name in the current directory.
  if (/\/\[(eval|stdin|worker eval)\]$/.test(f)) return false;
  // node_modules under the workspace is the agent's code too.
  return true;
}

function installedPackage(file) {
  const i = file.lastIndexOf('/node_modules/');
  if (i < 0) return null;
  const parts = file.slice(i + 14).split('/');
  return parts[0].startsWith('@') ? parts[0] + '/' + parts[1] : parts[0];
}

function refuse(what, from) {
  const line = '[cbrun judge-ban] import: ' + what + ' from ' + from;
  // Synchronous: this runs on the hooks thread, whose stdio is forwarded
  // asynchronously and lost if the process then dies of the error.
  try { writeSync(2, line + '\n'); } catch (_) { /* closed stderr */ }
  const e = new Error('cbrun: import of banned module ' + what + ' from ' + from);
  e.code = 'ERR_MODULE_NOT_FOUND';
  return e;
}

export async function resolve(specifier, context, nextResolve) {
  let from = null;
  if (context.parentURL && context.parentURL.startsWith('file:')) {
    const f = fileURLToPath(context.parentURL);
    if (agentFile(f)) from = f;
  }
  if (from !== null && banned(specifier)) throw refuse(specifier, from);
  const r = await nextResolve(specifier, context);
  if (from !== null && r.url && r.url.startsWith('file:')) {
    const pkg = installedPackage(fileURLToPath(r.url));
    if (pkg && banned(pkg)) throw refuse(pkg, from);
  }
  return r;
}
