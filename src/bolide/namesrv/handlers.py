"""Name-server request handlers: decode the header and body, ask the route tables, answer.

Codes served (docs/protocol.md §2.3; anything else gets the dispatcher's
REQUEST_CODE_NOT_SUPPORTED):

====  =================================  ==============================================
code  request                            answer
====  =================================  ==============================================
100   PUT_KV_CONFIG                      SUCCESS
101   GET_KV_CONFIG                      SUCCESS + ``value`` / QUERY_NOT_FOUND
102   DELETE_KV_CONFIG                   SUCCESS
103   REGISTER_BROKER                    SUCCESS + haServerAddr/masterAddr (slaves),
                                         body KVTable of ORDER_TOPIC_CONFIG when set
104   UNREGISTER_BROKER                  SUCCESS
105   GET_ROUTEINFO_BY_TOPIC             SUCCESS + TopicRouteData / TOPIC_NOT_EXIST
106   GET_BROKER_CLUSTER_INFO            SUCCESS + ClusterInfo
205   WIPE_WRITE_PERM_OF_BROKER          SUCCESS + ``wipeTopicCount``
206   GET_ALL_TOPIC_LIST_FROM_NAMESERVER SUCCESS + TopicList
216   DELETE_TOPIC_IN_NAMESRV            SUCCESS
219   GET_KVLIST_BY_NAMESPACE            SUCCESS + KVTable / QUERY_NOT_FOUND
224   GET_TOPICS_BY_CLUSTER              SUCCESS + TopicList
322   QUERY_DATA_VERSION                 SUCCESS + ``changed``, body the known DataVersion
327   ADD_WRITE_PERM_OF_BROKER           SUCCESS + ``addTopicCount``
318   UPDATE_NAMESRV_CONFIG              SUCCESS / NO_PERMISSION / SYSTEM_ERROR (config_handlers.py)
319   GET_NAMESRV_CONFIG                 SUCCESS + ``key=value`` lines (config_handlers.py)
====  =================================  ==============================================

A malformed header or body raises a ProtocolError, which the dispatcher answers with
SYSTEM_ERROR and the error text, as a Java name server does for its parse failures.

Route JSON is always standard JSON (``"0"`` broker-id keys): Java clients of every 4.x
version and the C++ client read it, so the Java name server's unquoted-key variant for clients
older than V4_9_4 is not needed.
"""

from __future__ import annotations

import dataclasses
import zlib

from bolide.base.types import Address, BrokerName, ClusterName, Topic
from bolide.namesrv.kv_config import ORDER_TOPIC_CONFIG_NAMESPACE, KvConfig
from bolide.namesrv.routes import BrokerRegistration, RouteTables
from bolide.protocol.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicList,
    TopicRouteData,
)
from bolide.protocol.bodies.fastjson import dumps, loads
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from bolide.protocol.headers.fields import required_str
from bolide.remoting import Connection, Dispatcher, Handler

HANDLER_FAMILY = "namesrv"
"""Dispatcher family of every name-server code (one bound, as Java's one executor)."""

CRC32_MASK = 0x7FFFFFFF
"""A register body's CRC32 is compared as a non-negative Java int (UtilAll.crc32)."""

COMPRESSED_REGISTER_REMARK = (
    "compressed REGISTER_BROKER body is not supported by this name server;"
    " set compressedRegister=false on the broker (the Java default)"
)


class NameServerHandlers:
    """The handlers of one name server, bound to its route tables and KV config.

    ``order_message_enable`` (default False, as NamesrvConfig.orderMessageEnable) adds the
    topic's ``ORDER_TOPIC_CONFIG`` KV item to its route as ``orderTopicConf``.
    """

    def __init__(
        self,
        routes: RouteTables,
        kv_config: KvConfig,
        *,
        order_message_enable: bool = False,
    ) -> None:
        self._routes = routes
        self._kv_config = kv_config
        self._order_message_enable = order_message_enable

    @property
    def order_message_enable(self) -> bool:
        """Whether routes carry ``orderTopicConf`` (orderMessageEnable)."""
        return self._order_message_enable

    def set_order_message_enable(self, enabled: bool) -> None:
        """Switch orderMessageEnable (UPDATE_NAMESRV_CONFIG, 318)."""
        self._order_message_enable = enabled

    def install(self, dispatcher: Dispatcher) -> None:
        """Register every name-server code on ``dispatcher``."""
        table: dict[RequestCode, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
        }
        for code, handler in table.items():
            dispatcher.register(code, handler, family=HANDLER_FAMILY)

    # --- brokers ---------------------------------------------------------------------------

    async def register_broker(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """REGISTER_BROKER (103): check the body CRC, record the broker and its topics."""
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body
        if header.body_crc32 != 0 and zlib.crc32(body) & CRC32_MASK != header.body_crc32:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if header.compressed:
            return request.make_response(ResponseCode.SYSTEM_ERROR, COMPRESSED_REGISTER_REMARK)
        if body:
            wrapper = RegisterBrokerBody.from_json(body).topic_config_wrapper
            topic_configs = wrapper.topic_config_table
            data_version = wrapper.data_version
        else:  # no topic table at all: keep what is known, only refresh liveness
            topic_configs, data_version = None, DataVersion()
        result = self._routes.register_broker(
            BrokerRegistration(
                cluster_name=ClusterName(header.cluster_name),
                broker_name=BrokerName(header.broker_name),
                broker_addr=Address(header.broker_addr),
                broker_id=header.broker_id,
                ha_server_addr=header.ha_server_addr,
                data_version=data_version,
                topic_configs=topic_configs,
                connection_key=connection,
            )
        )
        response_header = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        )
        order_topics = self._kv_config.items(ORDER_TOPIC_CONFIG_NAMESPACE)
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields=response_header.to_ext_fields(),
            body=KVTable(order_topics).to_json() if order_topics else b"",
        )

    async def unregister_broker(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """UNREGISTER_BROKER (104): forget one broker address."""
        header = UnregisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self._routes.unregister_broker(
            ClusterName(header.cluster_name),
            BrokerName(header.broker_name),
            Address(header.broker_addr),
            header.broker_id,
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def query_data_version(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_DATA_VERSION (322): has the broker's topic table changed since it last
        registered? An unchanged answer also counts as a sign of life."""
        header = UnregisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        address = Address(header.broker_addr)
        offered = DataVersion.from_object(loads(request.body)) if request.body else DataVersion()
        known = self._routes.data_version_of(address)
        changed = known is None or known != offered
        if not changed:
            self._routes.touch(address)
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields={"changed": "true" if changed else "false"},
            body=b"" if known is None else _data_version_json(known),
        )

    async def wipe_write_perm(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (205): stop producers from writing to a broker name."""
        broker_name = BrokerName(required_str(request.ext_fields, "brokerName"))
        count = self._routes.wipe_write_perm(broker_name)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)}
        )

    async def add_write_perm(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER (327): let producers write to a broker name again."""
        broker_name = BrokerName(required_str(request.ext_fields, "brokerName"))
        count = self._routes.add_write_perm(broker_name)
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    # --- routes and topics -----------------------------------------------------------------

    async def get_route_info(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC (105): the topic's route, or TOPIC_NOT_EXIST (17)."""
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self._routes.route_for_topic(Topic(header.topic))
        if route is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}",
            )
        if self._order_message_enable:
            order_conf = self._kv_config.get(ORDER_TOPIC_CONFIG_NAMESPACE, header.topic)
            if order_conf is not None:
                route = _with_order_conf(route, order_conf)
        return request.make_response(ResponseCode.SUCCESS, body=route.to_json())

    async def get_cluster_info(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO (106): every broker name and cluster."""
        body = self._routes.cluster_info().to_json()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def get_all_topics(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
        body = TopicList(tuple(self._routes.all_topics())).to_json()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def get_topics_by_cluster(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_TOPICS_BY_CLUSTER (224): topics with queues on a broker of the cluster."""
        cluster = ClusterName(required_str(request.ext_fields, "cluster"))
        body = TopicList(tuple(self._routes.topics_by_cluster(cluster))).to_json()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def delete_topic(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216): drop the topic's route (optionally one cluster's)."""
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        cluster = None if header.cluster_name is None else ClusterName(header.cluster_name)
        self._routes.delete_topic(Topic(header.topic), cluster)
        return request.make_response(ResponseCode.SUCCESS)

    # --- KV config -------------------------------------------------------------------------

    async def put_kv_config(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """PUT_KV_CONFIG (100); BackpressureError (SYSTEM_ERROR) when the store is full."""
        fields = request.ext_fields
        self._kv_config.put(
            required_str(fields, "namespace"),
            required_str(fields, "key"),
            required_str(fields, "value"),
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def get_kv_config(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_KV_CONFIG (101): the value in the ``value`` header field, or QUERY_NOT_FOUND."""
        namespace = required_str(request.ext_fields, "namespace")
        key = required_str(request.ext_fields, "key")
        value = self._kv_config.get(namespace, key)
        if value is None:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}"
            )
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"value": value})

    async def delete_kv_config(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_KV_CONFIG (102): SUCCESS whether or not the item existed."""
        fields = request.ext_fields
        self._kv_config.delete(required_str(fields, "namespace"), required_str(fields, "key"))
        return request.make_response(ResponseCode.SUCCESS)

    async def get_kv_list(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): a KVTable body, or QUERY_NOT_FOUND when empty."""
        namespace = required_str(request.ext_fields, "namespace")
        items = self._kv_config.items(namespace)
        if not items:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}"
            )
        return request.make_response(ResponseCode.SUCCESS, body=KVTable(items).to_json())


def _with_order_conf(route: TopicRouteData, order_conf: str) -> TopicRouteData:
    return dataclasses.replace(route, order_topic_conf=order_conf)


def _data_version_json(version: DataVersion) -> bytes:
    return dumps(version.to_object())
