import { parseListen } from "../../src/config/schema.ts";

// The two readings of one `listen` string the tests table: whether it is loopback, and the URL a client dials.
export const isLoopbackListen = (listen: string): boolean => parseListen(listen).loopback;
export const urlOfListen = (listen: string): string | null => parseListen(listen).url;
