/**
 * Types for the parts of the `sip` npm package (a SIP stack: parser, UDP/TCP transports and
 * RFC 3261 transactions; plain JavaScript, no types of its own) that the edge uses.
 */
declare module 'sip' {
  namespace sip {
    interface Uri {
      schema?: string;
      user?: string;
      password?: string;
      host: string;
      port?: number;
      params: Record<string, string | null>;
      headers: Record<string, string>;
    }
    /** A name-addr header value (From, To, Contact, Route, Record-Route). */
    interface NameAddr {
      name?: string;
      /** A string in From, To and Contact; parsed in Route and Record-Route. */
      uri: string | Uri;
      params: Record<string, string | null>;
    }
    interface Via {
      version?: string;
      protocol?: string;
      host?: string;
      port?: number;
      params: Record<string, string | null>;
    }
    interface Headers {
      via: Via[];
      to: NameAddr;
      from: NameAddr;
      'call-id': string;
      cseq: { seq: number; method: string };
      contact?: NameAddr[] | '*';
      route?: NameAddr[];
      'record-route'?: NameAddr[];
      /** Any other header: its value as text (repeated headers joined by commas). */
      [name: string]: unknown;
    }
    interface Request {
      method: string;
      uri: string | Uri;
      version?: string;
      headers: Headers;
      content?: string;
    }
    interface Response {
      status: number;
      reason: string;
      version?: string;
      headers: Headers;
      content?: string;
    }
    type Message = Request | Response;
    interface Address {
      protocol: string;
      address: string;
      port: number;
    }
    interface Remote extends Address {
      local: { address: string; port: number };
    }
    interface Connection {
      send(m: Message): void;
      release(): void;
      readonly protocol: string;
    }
    interface Transport {
      open(target: Address, onError?: (err: Error) => void): Connection;
      get(target: Address, onError?: (err: Error) => void): Connection | undefined;
      destroy(): void;
    }
    interface ServerTransaction {
      send(rs: Response): void;
      message(m: Message, remote?: Remote): void;
      shutdown(): void;
    }
    interface ClientTransaction {
      message(m: Message, remote?: Remote): void;
      shutdown(): void;
    }
    interface TransactionLayer {
      createServerTransaction(rq: Request, cn: Connection): ServerTransaction;
      createClientTransaction(
        cn: Connection,
        rq: Request,
        onResponse: (rs: Response, remote?: Remote) => void,
      ): ClientTransaction;
      getServer(m: Message): ServerTransaction | undefined;
      getClient(m: Message): ClientTransaction | undefined;
      destroy(): void;
    }
    interface TransportOptions {
      address?: string;
      port?: number;
      publicAddress?: string;
      udp?: boolean;
      tcp?: boolean;
      rport?: boolean;
    }
  }
  const sip: {
    makeTransport(
      options: sip.TransportOptions,
      onMessage: (m: sip.Message, remote: sip.Remote) => void,
    ): sip.Transport;
    makeTransactionLayer(options: sip.TransportOptions, open: unknown): sip.TransactionLayer;
    makeResponse(
      rq: sip.Request,
      status: number,
      reason?: string,
      extension?: { headers?: Record<string, unknown>; content?: string },
    ): sip.Response;
    parseUri(s: string | sip.Uri): sip.Uri | undefined;
    stringifyUri(u: string | sip.Uri): string;
    parseAOR(data: { s: string; i: number }): sip.NameAddr;
    copyMessage<T extends sip.Message>(m: T, deep?: boolean): T;
    generateBranch(): string;
    stringify(m: sip.Message): string;
    parse(s: string | Buffer): sip.Message | undefined;
  };
  export = sip;
}
