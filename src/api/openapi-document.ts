import { componentSchemas } from "./openapi-components.ts";
import { openApiPaths } from "./openapi-paths.ts";

/**
 * The OpenAPI document: the components (openapi-components.ts) and the paths (openapi-paths.ts). OpenAPI 3.1 uses JSON
 * Schema 2020-12, which is what zod 4 emits. The server "/" is the worker that served the document.
 */
export function openApiDocument(version: string) {
  const { components, event } = componentSchemas();
  return {
    openapi: "3.1.0",
    info: { title: "lora-worker", version, description: "SDXL LoRA training (kohya-ss sd-scripts) on demand." },
    servers: [{ url: "/", description: "the worker that served this document" }],
    components: { schemas: components, securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    security: [{ bearer: [] }],
    paths: openApiPaths(event),
  };
}
