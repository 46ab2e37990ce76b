import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['./rtrace.globalSetup.mjs'],
    include: ['*.test.mjs'],
    testTimeout: 30_000,
  },
});
