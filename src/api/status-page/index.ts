import { Hono } from "hono";
import { contentSecurityPolicy } from "./content-security-policy.ts";
import page from "./page.html" with { type: "text" };

// bun-types declares every *.html import an HTMLBundle; with { type: "text" } Bun hands over the file's text.
const PAGE = page as unknown as string;

const HEADERS = {
  "Content-Security-Policy": contentSecurityPolicy(PAGE),
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};

/** `GET /`: the status page, one self-contained document; every call it makes goes through the API's own auth. */
export function statusPageRoutes() {
  return new Hono().get("/", (c) => c.html(PAGE, 200, HEADERS));
}
