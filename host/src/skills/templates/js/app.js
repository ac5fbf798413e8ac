// {{name}}: a skillhost skill. Its one tool, `hello`, greets someone.
//
// `skillhost skill build` puts the skillhost JS SDK beside this module as ./skillhost.js and
// builds it with componentize-js. A tool's input schema comes from its `input` declaration.
import { boolean, optional, string, tool } from "./skillhost.js";

export const tools = [
  tool({
    name: "hello",
    description: "Greet someone by name.",
    input: {
      name: string("Who to greet."),
      excited: optional(boolean("Add an exclamation mark.")),
    },
    run({ name, excited = false }) {
      return { greeting: `Hello, ${name}${excited ? "!" : "."}` };
    },
  }),
];
