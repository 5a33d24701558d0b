// The baseline server: Bun.serve answering one constant JSON body, nothing else. It prints its URL the way the
// worker logs its own, so both are started and timed the same way. argv[2], when given, is the body to answer;
// `--version` prints a line and exits, like the worker's, to time a bare start and exit.
if (process.argv[2] === "--version") {
  console.log("bare-server");
  process.exit(0);
}
const body = process.argv[2] ?? JSON.stringify({ status: "ok" });
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(process.argv[3] ?? 0),
  fetch: () => new Response(body, { headers: { "content-type": "application/json" } }),
});
console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${server.port}` }));
