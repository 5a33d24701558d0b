// Imported `with { type: "file" }`: Bun hands over the photo's path, inside the compiled program once built.
declare module "*.jpg" {
  const path: string;
  export default path;
}
