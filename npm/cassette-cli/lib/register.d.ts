// The preload `node --import cassette-cli/register` (lib/register.js): imported for its effect.
/** The variable `cassette exec` sets to the channel's socket. */
export declare const CHANNEL_ENV: "CASSETTE_CHANNEL";
