/**
 * The in-memory provider's shell (src/adapters/providers/memory): what the scripts of the unit
 * tier may rely on, case by case — quoting, expansion, operators, redirections, control flow,
 * commands, exit statuses — and what it refuses (exit 2, a message, never a host command).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import type { ExecSpec, Provider } from '../../src/core/ports/index.js';
import { collect, never, sh } from '../contract/provider-contract-helpers.js';

let p: Provider;
let rid: string;
beforeAll(async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setTimerTickMode('nextTimerAsync');
  p = createMemoryProvider();
  rid = (await p.spawn({ sandbox_id: 'sb-shell', image: 'memory', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null })).runtime_id;
});
afterAll(async () => {
  await p.close?.();
  vi.useRealTimers();
});

const run = async (command: string, extra: Partial<ExecSpec> = {}) => {
  const r = await collect(p.exec(rid, sh(command, extra), never));
  return { out: r.stdout, err: r.stderr, code: r.exitCode };
};

describe('memory shell: output and status', () => {
  it.each([
    ['echo a b  c', 'a b c\n', 0],
    ['echo -n x', 'x', 0],
    ['echo -e "a\\tb"', 'a\tb\n', 0],
    ["echo 'single $HOME'", 'single $HOME\n', 0],
    ['echo "double \\$HOME \\\\ \\""', 'double $HOME \\ "\n', 0],
    ['echo a\\ b', 'a b\n', 0],
    ['printf "%s-%s\\n" a b c', 'a-b\nc-\n', 0],
    ['printf "%5s|%-3s|%03d\\n" x y 7', '    x|y  |007\n', 0],
    ['printf "%x %o %c %%\\n" 255 8 zed', 'ff 10 z %\n', 0],
    ['printf "%b" "a\\nb"', 'a\nb', 0],
    ['true; echo $?', '0\n', 0],
    ['false; echo $?', '1\n', 0],
    ['exit 7', '', 7],
    ['exit 300', '', 44],
    ['false || echo alt', 'alt\n', 0],
    ['true && echo yes || echo no', 'yes\n', 0],
    ['false && echo yes || echo no', 'no\n', 0],
    ['! false && echo negated', 'negated\n', 0],
    ['echo one; echo two', 'one\ntwo\n', 0],
    ['(exit 3); echo $?', '3\n', 0],
    ['(cd /tmp; pwd); pwd', '/tmp\n/workspace\n', 0],
    ['{ echo g1; echo g2; } > grp.txt; cat grp.txt', 'g1\ng2\n', 0],
  ])('%s', async (command, out, code) => {
    expect(await run(command)).toMatchObject({ out, code });
  });
});

describe('memory shell: variables and arguments', () => {
  it.each([
    ['X=1; echo $X ${X} "$X"', '1 1 1\n'],
    ['X="a  b"; printf "[%s]" $X "$X"', '[a][b][a  b]'],
    ['echo ${UNSET:-fallback} ${UNSET}end', 'fallback end\n'],
    ["X=outer; X=inner sh -c 'echo $X'; echo $X", 'inner\nouter\n'],
    ["export Y=exported; sh -c 'echo $Y'", 'exported\n'],
    ["sh -c 'echo $0 $1 $#' name first", 'name first 1\n'],
    ['set -e; unset HOME; echo "[$HOME]"', '[]\n'],
    ['for i in 1 2 3; do echo n$i; done', 'n1\nn2\nn3\n'],
    ['i=a; while [ $i != aaa ]; do echo $i; i=${i}a; done', 'a\naa\n'],
    ['n=x; until [ $n = xx ]; do n=${n}x; done; echo $n', 'xx\n'],
    ['if false; then echo a; elif true; then echo b; else echo c; fi', 'b\n'],
    ['if [ "x" = "y" ]; then echo eq; else echo ne; fi', 'ne\n'],
    ['test -d /tmp && test ! -f /tmp && echo dir', 'dir\n'],
  ])('%s', async (command, out) => {
    expect(await run(command)).toMatchObject({ out, code: 0 });
  });

  it('passes the request env and a default PATH and HOME', async () => {
    const r = await run('echo "$A|$PATH|$HOME|$PWD"', { env: { A: 'x y' } });
    expect(r.out).toBe('x y|/usr/local/bin:/usr/bin:/bin|/workspace|/workspace\n');
    expect((await run('env', { env: { ONLY: '1' } })).out).toContain('ONLY=1\n');
  });
});

describe('memory shell: files and redirections', () => {
  it.each([
    ['echo a > f1; echo b >> f1; cat f1', 'a\nb\n'],
    ['echo hidden > /dev/null; echo shown', 'shown\n'],
    ['echo to-err >&2 2>/dev/null; echo ok', 'ok\n'],
    ['mkdir -p d/e/f && touch d/e/f/t && ls d/e/f', 't\n'],
    ['echo x > m1; mv m1 m2; cat m2; test -e m1 || echo gone', 'x\ngone\n'],
    ['echo c > c1; cp c1 c2; cat c2', 'c\n'],
    ['echo s > s1; ln -s s1 s2; cat s2', 's\n'],
    ['mkdir -p r/s && touch r/s/t && rm -r r && test -e r || echo removed', 'removed\n'],
    ['rm -f never-there && echo fine', 'fine\n'],
    ['echo abc > w; cat < w', 'abc\n'],
    ['printf "1\\n2\\n3\\n" | head -n 2', '1\n2\n'],
    ['head -c 5 /dev/zero | wc -c', '5\n'],
    ['seq 3 | wc -l', '3\n'],
    ['echo piped | cat | cat', 'piped\n'],
    ['printf "#!/bin/sh\\necho script \\$1\\n" > run.sh; chmod 755 run.sh; ./run.sh arg', 'script arg\n'],
  ])('%s', async (command, out) => {
    expect(await run(command)).toMatchObject({ out, code: 0 });
  });

  it('a missing file is a command error, not an exec failure', async () => {
    const r = await run('cat /workspace/none; echo after');
    expect(r.out).toBe('after\n');
    expect(r.err).toContain('none');
  });

  it('commands see files written through the provider, and the other way round', async () => {
    await p.writeFile(rid, '/workspace/api.txt', Buffer.from('from-api'), 0o600);
    expect((await run('cat api.txt; echo from-shell > shell.txt')).out).toBe('from-api');
    expect(Buffer.from(await p.readFile(rid, '/workspace/shell.txt')).toString()).toBe('from-shell\n');
    expect((await p.stat(rid, '/workspace/api.txt')).mode).toBe('0600');
  });
});

describe('memory shell: what it refuses', () => {
  it.each([
    ['echo $(id)'],
    ['echo `id`'],
    ['echo $((1+1))'],
    ['echo "unterminated'],
    ["echo 'unterminated"],
    ['case x in x) echo;; esac'],
    ['( echo'],
  ])('%s is a syntax error (exit 2)', async (command) => {
    const r = await run(command);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/^sh: syntax error: /);
  });

  it.each([
    ['sbx-nope', 127, 'sbx: command not found: sbx-nope\n'],
    ['./nope.sh', 127, 'sbx: command not found: ./nope.sh\n'],
    ['/tmp', 126, 'sbx: permission denied: /tmp\n'],
  ])('%s exits %i', async (command, code, err) => {
    expect(await run(command)).toMatchObject({ out: '', err, code });
  });

  it('sleep waits on the timers and a signal ends it', async () => {
    const t0 = Date.now();
    expect((await run('sleep 2; echo woke')).out).toBe('woke\n');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2000);
    expect((await run('sleep nonsense')).code).toBe(1);
  });

  it('a destroyed runtime kills its running commands', async () => {
    const other = (await p.spawn({ sandbox_id: 'sb-shell2', image: 'memory', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null }))
      .runtime_id;
    const iter = p.exec(other, sh('echo started; sleep 1000; echo never'), never)[Symbol.asyncIterator]();
    expect((await iter.next()).value).toMatchObject({ stream: 'stdout' });
    await p.destroy(other);
    const rest = await collect({ [Symbol.asyncIterator]: () => iter });
    expect(rest.stdout).toBe('');
    expect(rest.exitCode).toBe(137);
  });
});
