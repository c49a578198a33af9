// mcp_sdk.mjs - a whole `corral mcp` session driven by the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk: Client + StdioClientTransport),
// a client nobody here wrote.
//
//   node mcp_sdk.mjs SDK_PREFIX CORRAL POLICY_FILE WORKSPACE
//
// POLICY_FILE offers WORKSPACE (a host directory) to sandboxes, for the diff
// and export tools.
// SDK_PREFIX is where `npm install --prefix` put the SDK.  Prints "ok - ..."
// per check and "N passed, N failed"; exits non-zero on a failure.  Every
// wait is bounded (the SDK's request timeout, counted retries).
import { pathToFileURL } from 'node:url';

const [prefix, corral, policy, workspace] = process.argv.slice(2);
const sdk = `${prefix}/node_modules/@modelcontextprotocol/sdk/dist/esm`;
const { Client } = await import(pathToFileURL(`${sdk}/client/index.js`));
const { StdioClientTransport } = await import(pathToFileURL(`${sdk}/client/stdio.js`));

let passed = 0, failed = 0;
function check(cond, what, detail) {
	if (cond) {
		passed++;
		console.log(`ok - ${what}`);
	} else {
		failed++;
		console.log(`not ok - ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 600)}`);
	}
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (r) => (r.content || []).map((c) => c.text).join('');

const transport = new StdioClientTransport({
	command: corral,
	args: ['mcp', '--private', '--policy', policy],
	stderr: 'inherit',
	env: { ...process.env },
});
const client = new Client({ name: 'corral-test', version: '1.0.0' });
await client.connect(transport);
check(client.getServerVersion()?.name === 'corral', 'initialized: the server is corral',
      client.getServerVersion());

async function call(name, args, opts) {
	return client.callTool({ name, arguments: args }, undefined, opts);
}

try {
	const { tools } = await client.listTools();
	const names = tools.map((t) => t.name);
	for (const n of ['sandbox_create', 'sandbox_list', 'exec', 'file_read', 'file_write',
			 'file_list', 'sandbox_destroy', 'sandbox_events', 'process_output'])
		check(names.includes(n), `tools/list has ${n}`, names);

	let r = await call('sandbox_create', { labels: { who: 'sdk' }, workspace });
	const sid = r.structuredContent?.id;
	check(!r.isError && /^sb-/.test(sid || ''), 'sandbox_create gives an id', r);

	r = await call('exec', { sandbox_id: sid, command: 'echo hello' });
	check(!r.isError && r.structuredContent.exit_code === 0 &&
	      r.structuredContent.stdout === 'hello\n', 'exec: success', r);

	r = await call('exec', { sandbox_id: sid, argv: ['/bin/sh', '-c', 'echo oops >&2; exit 3'] });
	check(!r.isError && r.structuredContent.exit_code === 3 &&
	      r.structuredContent.stderr === 'oops\n' && /exit code 3/.test(text(r)),
	      'exec: a failing command is a result with its exit code, not an error', r);

	r = await call('exec', { sandbox_id: sid, command: 'sleep 30', timeout_seconds: 1 });
	check(!r.isError && r.structuredContent.status === 'timeout' &&
	      /timeout/.test(r.structuredContent.reason), 'exec: a timeout is the result', r);

	r = await call('exec', { sandbox_id: sid, command: 'curl -sS -m 10 http://denied.example/; echo rc=$?' });
	const denials = r.structuredContent?.denials || [];
	check(!r.isError && denials.some((d) => d.type === 'egress.denied' && d.host === 'denied.example'),
	      'exec: a denied egress is in the result\'s denials', r);
	r = await call('sandbox_events', { sandbox_id: sid, denials_only: true });
	check(!r.isError && r.structuredContent.events.some((e) => e.type === 'egress.denied'),
	      'sandbox_events: the denial is there', r);

	const progress = [];
	// the output is written while the command runs: what is written in
	// its last instant may reach the result before the stream
	r = await call('exec', { sandbox_id: sid, command: 'echo one; echo two >&2; sleep 1' },
		       { onprogress: (p) => progress.push(p.message) });
	check(!r.isError && progress.includes('stdout: one\n') && progress.includes('stderr: two\n'),
	      'exec: output streamed as progress', progress);

	r = await call('file_write', { sandbox_id: sid, path: '/tmp/hello.txt', content: 'héllo\n' });
	check(!r.isError && r.structuredContent.size === 7, 'file_write: text', r);
	r = await call('file_write', { sandbox_id: sid, path: '/tmp/bin', content: 'AP8BAg==', encoding: 'base64' });
	check(!r.isError && r.structuredContent.size === 4, 'file_write: base64', r);
	r = await call('file_read', { sandbox_id: sid, path: '/tmp/hello.txt' });
	check(!r.isError && r.structuredContent.content === 'héllo\n' &&
	      r.structuredContent.encoding === 'text', 'file_read: text', r);
	r = await call('file_read', { sandbox_id: sid, path: '/tmp/bin' });
	check(!r.isError && r.structuredContent.content === 'AP8BAg==' &&
	      r.structuredContent.encoding === 'base64', 'file_read: binary comes back as base64', r);
	r = await call('file_list', { sandbox_id: sid, path: '/tmp' });
	const entries = (r.structuredContent?.entries || []).map((e) => e.name).sort();
	check(!r.isError && entries.includes('hello.txt') && entries.includes('bin'), 'file_list', r);
	r = await call('file_read', { sandbox_id: sid, path: '/tmp/nope' });
	check(r.isError === true && /404/.test(text(r)), 'file_read: a missing file is a tool error', r);

	// the file channel as harnesses use it: parents, mkdir, rename, trees, archives
	r = await call('file_write', { sandbox_id: sid, path: '/tmp/deep/a/b.txt', content: 'deep\n', parents: true });
	check(!r.isError && r.structuredContent.size === 5, 'file_write: parents', r);
	r = await call('file_mkdir', { sandbox_id: sid, path: '/tmp/m/n', parents: true });
	check(!r.isError, 'file_mkdir', r);
	r = await call('file_rename', { sandbox_id: sid, from: '/tmp/deep/a/b.txt', to: '/tmp/m/n/c.txt' });
	check(!r.isError && r.structuredContent.to === '/tmp/m/n/c.txt', 'file_rename', r);
	r = await call('file_list', { sandbox_id: sid, path: '/tmp/m', recursive: true });
	const tree = (r.structuredContent?.entries || []).map((e) => `${e.name}:${e.type}:${e.mode}`);
	check(!r.isError && tree.join(' ') === 'n:dir:0755 n/c.txt:file:0644', 'file_list: recursive, octal modes', tree);
	r = await call('archive_read', { sandbox_id: sid, path: '/tmp/m' });
	const tar = r.structuredContent?.content;
	check(!r.isError && r.structuredContent.size > 0 && tar, 'archive_read', r);
	r = await call('archive_write', { sandbox_id: sid, path: '/tmp/copy', content: tar });
	check(!r.isError && r.structuredContent.entries === 2, 'archive_write', r);
	r = await call('file_read', { sandbox_id: sid, path: '/tmp/copy/n/c.txt' });
	check(!r.isError && r.structuredContent.content === 'deep\n', 'archive_write: the file is there', r);
	r = await call('archive_write', { sandbox_id: sid, path: '/tmp/copy2', content: 'aGVsbG8K' });
	check(r.isError === true && /400/.test(text(r)), 'archive_write: not a tar is a tool error', r);

	// a background process's stdin, output from an offset, signals
	r = await call('exec', { sandbox_id: sid, command: 'cat', background: true, stdin_open: true });
	const cat = r.structuredContent?.pid;
	check(!r.isError && cat > 0, 'exec: background with stdin_open', r);
	r = await call('process_stdin', { sandbox_id: sid, pid: cat, data: 'hi\n' });
	check(!r.isError && r.structuredContent.accepted === 3, 'process_stdin', r);
	r = await call('process_stdin', { sandbox_id: sid, pid: cat, data: 'dGhlcmUK', encoding: 'base64', eof: true });
	check(!r.isError && r.structuredContent.eof === true, 'process_stdin: base64 and eof', r);
	r = await call('process_output', { sandbox_id: sid, pid: cat, follow: true, timeout_seconds: 60 });
	check(!r.isError && r.structuredContent.state === 'exited' && r.structuredContent.stdout === 'hi\nthere\n' &&
	      r.structuredContent.stdout_next_offset === 9, 'process_output: followed to the end', r);
	r = await call('process_output', { sandbox_id: sid, pid: cat, offset: 3, stream: 'stdout' });
	check(!r.isError && r.structuredContent.stdout === 'there\n', 'process_output: from an offset', r);
	r = await call('process_stdin', { sandbox_id: sid, pid: cat, data: 'late' });
	check(r.isError === true && /409/.test(text(r)), 'process_stdin: an ended process is a tool error', r);
	r = await call('exec', { sandbox_id: sid, background: true,
		command: 'trap "echo term; exit 7" TERM; echo ready; while :; do sleep 0.1; done' });
	const trap = r.structuredContent?.pid;
	r = await call('process_output', { sandbox_id: sid, pid: trap, follow: true, timeout_seconds: 1 });
	for (let i = 0; i < 60 && !/ready/.test(r.structuredContent?.stdout || ''); i++)
		r = await call('process_output', { sandbox_id: sid, pid: trap, follow: true, timeout_seconds: 1 });
	check(!r.isError && r.structuredContent.state === 'running', 'process_output: follow until the timeout', r);
	r = await call('process_signal', { sandbox_id: sid, pid: trap, signal: 'TERM' });
	check(!r.isError && r.structuredContent.signal === 15, 'process_signal', r);
	r = await call('process_wait', { sandbox_id: sid, pid: trap, timeout_seconds: 60 });
	check(!r.isError && r.structuredContent.result?.exit_code === 7 && /term/.test(r.structuredContent.stdout),
	      'process_wait: the trap ran', r);

	// the workspace the operator offered: diff and export as a patch
	r = await call('file_write', { sandbox_id: sid, path: '/workspace/new.txt', content: 'new\n' });
	r = await call('workspace_diff', { sandbox_id: sid });
	check(!r.isError && r.structuredContent.changes.some((c) => c.path === 'new.txt' && c.change === 'added'),
	      'workspace_diff', r);
	r = await call('workspace_diff', { sandbox_id: sid, patch: true });
	check(!r.isError && /\+\+\+ b\/new.txt/.test(r.structuredContent.patch), 'workspace_diff: patch', r);
	r = await call('workspace_export', { sandbox_id: sid });
	check(!r.isError && r.structuredContent.mode === 'patch' && /new\.txt/.test(r.structuredContent.patch),
	      'workspace_export: patch', r);
	r = await call('sandbox_keepalive', { sandbox_id: sid, ttl_seconds: 600 });
	check(!r.isError && typeof r.structuredContent.expires_at === 'string', 'sandbox_keepalive', r);
	r = await call('sandbox_list', { labels: { who: 'sdk' } });
	check(!r.isError && r.structuredContent.sandboxes.length === 1, 'sandbox_list: by label', r);
	r = await call('sandbox_list', { labels: { who: 'nobody' } });
	check(!r.isError && r.structuredContent.sandboxes.length === 0, 'sandbox_list: no such label', r);

	r = await call('exec', { sandbox_id: sid, command: 'sleep 300', background: true });
	const pid = r.structuredContent?.pid;
	check(!r.isError && pid > 0 && r.structuredContent.status === 'running', 'exec in the background', r);
	r = await call('process_output', { sandbox_id: sid, pid });
	check(!r.isError && r.structuredContent.state === 'running', 'process_output: running', r);
	r = await call('process_kill', { sandbox_id: sid, pid });
	check(!r.isError && r.structuredContent.state === 'exited', 'process_kill', r);
	r = await call('exec', { sandbox_id: sid, command: 'sleep 0.5; echo waited; exit 5', background: true });
	r = await call('process_wait', { sandbox_id: sid, pid: r.structuredContent?.pid, timeout_seconds: 60 });
	check(!r.isError && r.structuredContent.state === 'exited' && r.structuredContent.result?.exit_code === 5 &&
	      r.structuredContent.stdout === 'waited\n', 'process_wait', r);

	// cancellation mid-call: abort once the command said it started
	const ac = new AbortController();
	let aborted = false;
	const pending = call('exec', { sandbox_id: sid, command: 'echo started; exec sleep 321' },
			     { signal: ac.signal, timeout: 120000,
			       onprogress: (p) => { if (/started/.test(p.message)) ac.abort(); } });
	try {
		await pending;
	} catch (e) {
		aborted = true;
	}
	check(aborted, 'a cancelled call is rejected by the client');
	let left = true;
	for (let i = 0; i < 60 && left; i++) {
		r = await call('exec', { sandbox_id: sid,
			command: 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done' });
		left = /sleep 321/.test(r.structuredContent?.stdout || '');
		if (left)
			await sleep(250);
	}
	check(!left, 'the cancelled command is gone from the sandbox', r);

	r = await call('sandbox_list', {});
	check(!r.isError && r.structuredContent.sandboxes.some((s) => s.id === sid), 'sandbox_list', r);
	r = await call('sandbox_destroy', { sandbox_id: sid });
	check(!r.isError && r.structuredContent.state === 'destroyed', 'sandbox_destroy', r);
	r = await call('sandbox_info', { sandbox_id: sid });
	check(r.isError === true, 'a destroyed sandbox is a tool error', r);
} catch (e) {
	check(false, 'the session ran to its end', String(e && e.stack || e));
} finally {
	await client.close();
}
console.log(`mcp sdk: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
