import { describe, expect, test } from "bun:test";
import { normalName, parseLock, PYTHON_LOCK } from "../../src/trainer/lock.ts";

describe("the Python lock built into the binary", () => {
  test("pins torch 2.14.1, bitsandbytes 0.50.2 and sd-scripts' accelerate, the face scorer's dlib-bin and its models, each package once, schedulefree and the models from source", () => {
    const version = (name: string) => PYTHON_LOCK.find((pin) => pin.name === name)?.version;
    expect([version("torch"), version("bitsandbytes"), version("accelerate")]).toEqual(["2.14.1", "0.50.2", "1.6.0"]);
    expect([version("dlib-bin"), version("face-recognition-models")]).toEqual(["20.0.1.post1", "0.3.0"]);
    expect(new Set(PYTHON_LOCK.map((pin) => normalName(pin.name))).size).toBe(PYTHON_LOCK.length);
    expect(PYTHON_LOCK.filter((pin) => pin.fromSource).map((pin) => pin.name)).toEqual(["face-recognition-models", "schedulefree"]);
  });

  test("a line that is not an exact pin is refused with its line number (the contrast)", () => {
    expect(() => parseLock("# notes\nfoo==1.0\n\nbar>=2\n")).toThrow('python-lock.txt line 4 is not "name==version": bar>=2');
    expect(parseLock("# notes\nfoo==1.0\nBar_Baz==2.0  # from source\n")).toEqual([
      { name: "foo", version: "1.0", fromSource: false },
      { name: "Bar_Baz", version: "2.0", fromSource: true },
    ]);
  });
});
