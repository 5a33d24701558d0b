// Python programs the doctor runs in the trainer's venv, built into the binary as their text.
declare module "*.py" {
  const text: string;
  export default text;
}
