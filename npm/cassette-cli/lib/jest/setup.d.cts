// A jest setupFilesAfterEnv entry: it exports nothing.
export {};
