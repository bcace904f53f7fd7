import { spawn } from 'node:child_process';
import { Client } from './dist/client/index.js';
const srv = spawn(process.execPath, ['bin/sbx.js','serve','--host','127.0.0.1','--port','0'], { env: { ...process.env, SVC_PROVIDERS_DEFAULT:'docker', SVC_DEFAULTS_IMAGE:'sbx-test/busybox:latest', HOME:'/tmp/m2home', SBX_CONFIG:'' }, stdio:['ignore','pipe','pipe'] });
let url; const tim=[];
srv.stderr.on('data', d => { const s=d.toString(); const m=/TIMING read=([\d.]+)/.exec(s); if (m) tim.push(+m[1]); });
await new Promise((res)=>{ for (const st of [srv.stdout, srv.stderr]) st.on('data', d=>{ const m=/http:\/\/[0-9.:]+/.exec(d.toString()); if(m){url=m[0];res();}}); });
const client = new Client({ url });
const { id } = await client.spawn({ memory_mb: 256 });
const big = Buffer.alloc(10*1024*1024, 7);
await client.files.write(id,'/workspace/large.bin', big);
const t=[];
for (let i=0;i<15;i++){ const s=performance.now(); await client.files.read(id,'/workspace/large.bin'); t.push(performance.now()-s); }
const med=a=>a.sort((x,y)=>x-y)[a.length>>1];
console.log('client', med(t).toFixed(1), 'server read', med(tim).toFixed(1));
await client.destroy(id); srv.kill('SIGTERM');
