// Imported `with { type: "file" }`: Bun hands over the file's path, inside the compiled program once built.
declare module "*/clip-merges.txt.gz" {
  const path: string;
  export default path;
}
