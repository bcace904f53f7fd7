#!/usr/bin/env node
// The sbx shim: check Node, load the built CLI, run main(argv). The exit code is set here, once.
// CommonJS on purpose (bin/package.json): a bare `sbx --version` answers without starting the ES
// module loader, which alone costs about a third of Node's own start-up.
'use strict';
const [major, minor, patch] = process.versions.node.split('.').map(Number);
const argv = process.argv.slice(2);

// process.stdout and process.stderr are made on first use: making one for a pipe loads node:stream,
// which `sbx --version` never needs and `sbx exec ID true` needs only if the command prints (issue 33).
const opened = { stdout: false, stderr: false };
const io = {
  stdout() {
    if (!opened.stdout) {
      opened.stdout = true;
      // A closed pipe (`sbx ls | head -1`) is not an error worth a stack trace.
      process.stdout.on('error', (err) => {
        if (err && err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
        throw err;
      });
    }
    return process.stdout;
  },
  stderr() {
    opened.stderr = true;
    return process.stderr;
  },
};

function finish(code) {
  process.exitCode = code;
  // Leave as soon as stdout and stderr have taken everything written (the callbacks of these empty
  // writes run after every earlier write is flushed, pipes included): a kept-alive connection or a
  // timer left by a command must not hold the exit (issue 33: it cost ~100-250 ms a command).
  // A stream never made has nothing to flush.
  const open = [opened.stdout && process.stdout, opened.stderr && process.stderr].filter(Boolean);
  const next = () => {
    const stream = open.shift();
    if (stream) stream.write('', next);
    else process.exit();
  };
  next();
}

/** Writes `text` to fd 1 at once, without making process.stdout (EAGAIN on a non-blocking pipe: through it). */
function printNow(text) {
  const fs = require('node:fs');
  let buf = Buffer.from(text);
  try {
    while (buf.length > 0) buf = buf.subarray(fs.writeSync(1, buf));
  } catch (err) {
    if (err && err.code === 'EPIPE') process.exit(0);
    if (!err || err.code !== 'EAGAIN') throw err;
    io.stdout().write(buf);
  }
}

// The same floor as package.json `engines` (undici 7 needs 20.18.1).
if (major < 20 || (major === 20 && (minor < 18 || (minor === 18 && patch < 1)))) {
  io.stderr().write(`sbx: Node.js 20.18.1 or newer is required (this is ${process.version})\n`);
  finish(1);
} else if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  printNow(`${require('../package.json').version}\n`);
  finish(0);
} else {
  // `sbx exec ID CMD…` (the plain streamed form) runs from one CommonJS bundle without commander or
  // the command tree (issue 33); any other argv, or one it does not take, runs the full CLI.
  // SBX_CLI_FAST_PATH=0 turns it off (the tests compare both paths byte for byte).
  const fast = argv.includes('exec') && process.env.SBX_CLI_FAST_PATH !== '0' ? fastExec() : undefined;
  const run = (fast && fast(argv, io)) || (io.stdout(), io.stderr(), import('../dist/cli.js').then(({ main }) => main(argv)));
  run.then(finish, (err) => {
    io.stderr().write(`sbx: unexpected error: ${err && err.stack ? err.stack : String(err)}\n`);
    finish(1);
  });
}

/**
 * The fast path's entry (dist/cli-exec.cjs), or undefined in a tree built without it (tsc alone).
 * Compiled with V8's code cache of an earlier run (dist/cli-exec.cjs.cache): compiling the bundle and
 * the functions an exec runs costs ~3 ms a process otherwise (issue 33). The cache is used only when
 * its header names this very bundle file (size, mtime, inode; V8 itself checks its version, flags and the
 * source length) and is written anew, atomically, after an exec that ran its command when there was
 * none or V8 rejected it; any failure to read or write it is ignored.
 */
function fastExec() {
  const fs = require('node:fs');
  const path = require('node:path');
  const file = path.join(__dirname, '..', 'dist', 'cli-exec.cjs');
  let source;
  let stat;
  try {
    source = fs.readFileSync(file, 'utf8');
    stat = fs.statSync(file);
  } catch (err) {
    if (err && err.code === 'ENOENT') return undefined;
    throw err;
  }
  const cacheFile = `${file}.cache`;
  const header = Buffer.from(`${stat.size}:${stat.mtimeMs}:${stat.ino}\n`);
  let cachedData;
  try {
    const cache = fs.readFileSync(cacheFile);
    if (cache.subarray(0, header.length).equals(header)) cachedData = cache.subarray(header.length);
  } catch {}
  const { Script } = require('node:vm');
  const Module = require('node:module');
  const wrapper = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(wrapper, { filename: file, cachedData });
  const mod = new Module(file, module);
  mod.filename = file;
  mod.paths = Module._nodeModulePaths(path.dirname(file));
  script.runInThisContext().call(mod.exports, mod.exports, Module.createRequire(file), mod, file, path.dirname(file));
  mod.loaded = true;
  require.cache[file] = mod;
  const { fastExec: run } = mod.exports;
  if (cachedData && !script.cachedDataRejected) return run;
  return (argv, streams) => {
    const ran = run(argv, streams);
    // After a command ran (its own exit code): the functions of a whole exec are compiled by then.
    ran?.then(
      (code) => code < 124 && process.once('exit', () => saveCache(fs, cacheFile, header, script)),
      () => undefined,
    );
    return ran;
  };
}

/** Writes the cache by rename; where dist/ is not writable (a root-owned install) it gives up before serializing. */
function saveCache(fs, cacheFile, header, script) {
  const tmp = `${cacheFile}.${process.pid}.tmp`;
  let fd;
  try {
    fd = fs.openSync(tmp, 'wx', 0o644);
  } catch {
    return;
  }
  try {
    fs.writeSync(fd, Buffer.concat([header, script.createCachedData()]));
    fs.closeSync(fd);
    fd = undefined;
    fs.renameSync(tmp, cacheFile);
  } catch {
    try {
      if (fd !== undefined) fs.closeSync(fd);
      fs.unlinkSync(tmp);
    } catch {}
  }
}
