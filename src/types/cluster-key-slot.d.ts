/** cluster-key-slot (ioredis' own dependency): the Redis Cluster slot of a key, honouring its hash tag. */
declare module 'cluster-key-slot' {
  function calculateSlot(key: string | Buffer): number;
  export default calculateSlot;
}
