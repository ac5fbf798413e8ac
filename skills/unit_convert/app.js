// unit_convert: converts between units of length, mass and temperature. A skill written in
// JavaScript on the skillhost JS SDK (`./skillhost.js`, put beside this module by
// `skillhost skill build`), built with componentize-js.
//
// The tool's input schema comes from its `input` declaration; `toolTarget` is the optional
// hook of that name (the build exports exactly the hooks this module exports).
import { number, string, tool, ToolError, log } from "./skillhost.js";

// Factors to a base unit per dimension; temperatures are converted by formula.
const LINEAR = {
  length: { m: 1, km: 1000, cm: 0.01, mm: 0.001, mi: 1609.344, yd: 0.9144, ft: 0.3048, in: 0.0254 },
  mass: { kg: 1, g: 0.001, lb: 0.45359237, oz: 0.028349523125 },
};
const TEMPERATURE = {
  c: { toK: (v) => v + 273.15, fromK: (k) => k - 273.15 },
  f: { toK: (v) => ((v - 32) * 5) / 9 + 273.15, fromK: (k) => ((k - 273.15) * 9) / 5 + 32 },
  k: { toK: (v) => v, fromK: (k) => k },
};
const UNITS = [...Object.values(LINEAR).flatMap(Object.keys), ...Object.keys(TEMPERATURE)];

function dimension(unit) {
  if (unit in TEMPERATURE) return "temperature";
  return Object.keys(LINEAR).find((d) => unit in LINEAR[d]);
}

export function convert(value, from, to) {
  const [a, b] = [dimension(from), dimension(to)];
  if (a !== b) throw new ToolError(`cannot convert ${from} (${a}) to ${to} (${b})`);
  if (a === "temperature") return TEMPERATURE[to].fromK(TEMPERATURE[from].toK(value));
  return (value * LINEAR[a][from]) / LINEAR[a][to];
}

export const tools = [
  tool({
    name: "convert",
    description: "Convert a value between units of length, mass or temperature.",
    input: {
      value: number("The value to convert."),
      from: string("The unit of the value.", { enum: UNITS }),
      to: string("The unit to convert to.", { enum: UNITS }),
    },
    exposeResult: true,
    run({ value, from, to }) {
      const result = Math.round(convert(value, from, to) * 1e6) / 1e6;
      log.debug("converted", { from, to });
      return { value, from, to, result, dimension: dimension(from) };
    },
  }),
];

export function toolTarget(toolName, input) {
  return { target: `${input.from}->${input.to}`, queryKind: "unit_conversion" };
}
