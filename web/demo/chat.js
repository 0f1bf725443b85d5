// web/demo/chat.js — chat mode (in progress).
export {};
