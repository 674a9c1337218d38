// The preload `node --import cassette-cli/register` (lib/register.js): imported for its effect.
/** The variable `cassette exec` sets to the channel's socket. */
export declare const CHANNEL_ENV: "CASSETTE_CHANNEL";
/** Where the runner helpers leave a worker's scope (on the node:http module object). */
export declare const SCOPE_SLOT: unique symbol;
