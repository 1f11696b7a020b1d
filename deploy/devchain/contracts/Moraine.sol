// SPDX-License-Identifier: MIT
// Contracts used by the moraine development chain to generate realistic traffic.
// Compiled by gen.sh (solc 0.8.28, optimizer on); the ABI and bytecode in build/
// are committed and embedded into the devchain package.
pragma solidity 0.8.28;

interface IERC721Receiver {
    function onERC721Received(address operator, address from, uint256 tokenId, bytes calldata data) external returns (bytes4);
}

interface IERC1155Receiver {
    function onERC1155Received(address operator, address from, uint256 id, uint256 value, bytes calldata data) external returns (bytes4);
    function onERC1155BatchReceived(address operator, address from, uint256[] calldata ids, uint256[] calldata values, bytes calldata data) external returns (bytes4);
}

/// A plain ERC-20 with a public mint (it is a test token).
contract MoraineERC20 {
    string public name;
    string public symbol;
    uint8 public decimals;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function mint(address to, uint256 amount) external {
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        _transfer(msg.sender, to, amount);
        return true;
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        allowance[msg.sender][spender] = amount;
        emit Approval(msg.sender, spender, amount);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= amount, "ERC20: insufficient allowance");
        if (allowed != type(uint256).max) {
            allowance[from][msg.sender] = allowed - amount;
        }
        _transfer(from, to, amount);
        return true;
    }

    function _transfer(address from, address to, uint256 amount) internal {
        require(to != address(0), "ERC20: transfer to the zero address");
        uint256 bal = balanceOf[from];
        require(bal >= amount, "ERC20: transfer amount exceeds balance");
        unchecked {
            balanceOf[from] = bal - amount;
        }
        balanceOf[to] += amount;
        emit Transfer(from, to, amount);
    }
}

/// A plain ERC-721 with a public mint.
contract MoraineERC721 {
    string public name;
    string public symbol;
    mapping(uint256 => address) public ownerOf;
    mapping(address => uint256) public balanceOf;
    mapping(uint256 => address) public getApproved;
    mapping(address => mapping(address => bool)) public isApprovedForAll;

    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
    event Approval(address indexed owner, address indexed approved, uint256 indexed tokenId);
    event ApprovalForAll(address indexed owner, address indexed operator, bool approved);

    constructor(string memory name_, string memory symbol_) {
        name = name_;
        symbol = symbol_;
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0x80ac58cd || id == 0x5b5e139f;
    }

    function tokenURI(uint256 tokenId) external view returns (string memory) {
        require(ownerOf[tokenId] != address(0), "ERC721: invalid token ID");
        return "ipfs://moraine/token.json";
    }

    function mint(address to, uint256 tokenId) external {
        require(to != address(0), "ERC721: mint to the zero address");
        require(ownerOf[tokenId] == address(0), "ERC721: token already minted");
        ownerOf[tokenId] = to;
        balanceOf[to] += 1;
        emit Transfer(address(0), to, tokenId);
    }

    function approve(address to, uint256 tokenId) external {
        address owner = ownerOf[tokenId];
        require(msg.sender == owner || isApprovedForAll[owner][msg.sender], "ERC721: not owner");
        getApproved[tokenId] = to;
        emit Approval(owner, to, tokenId);
    }

    function setApprovalForAll(address operator, bool approved) external {
        isApprovedForAll[msg.sender][operator] = approved;
        emit ApprovalForAll(msg.sender, operator, approved);
    }

    function transferFrom(address from, address to, uint256 tokenId) public {
        require(ownerOf[tokenId] == from && from != address(0), "ERC721: transfer from incorrect owner");
        require(to != address(0), "ERC721: transfer to the zero address");
        require(msg.sender == from || getApproved[tokenId] == msg.sender || isApprovedForAll[from][msg.sender],
            "ERC721: caller is not token owner or approved");
        delete getApproved[tokenId];
        balanceOf[from] -= 1;
        balanceOf[to] += 1;
        ownerOf[tokenId] = to;
        emit Transfer(from, to, tokenId);
    }

    function safeTransferFrom(address from, address to, uint256 tokenId) external {
        safeTransferFrom(from, to, tokenId, "");
    }

    function safeTransferFrom(address from, address to, uint256 tokenId, bytes memory data) public {
        transferFrom(from, to, tokenId);
        if (to.code.length > 0) {
            require(IERC721Receiver(to).onERC721Received(msg.sender, from, tokenId, data) == IERC721Receiver.onERC721Received.selector,
                "ERC721: transfer to non ERC721Receiver implementer");
        }
    }
}

/// A plain ERC-1155 with public mints, a name and a symbol.
contract MoraineERC1155 {
    string public name;
    string public symbol;
    mapping(uint256 => mapping(address => uint256)) public balanceOf;
    mapping(address => mapping(address => bool)) public isApprovedForAll;

    event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
    event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);
    event ApprovalForAll(address indexed account, address indexed operator, bool approved);
    event URI(string value, uint256 indexed id);

    constructor(string memory name_, string memory symbol_) {
        name = name_;
        symbol = symbol_;
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0xd9b67a26 || id == 0x0e89341c;
    }

    function uri(uint256) external pure returns (string memory) {
        return "ipfs://moraine/{id}.json";
    }

    function balanceOfBatch(address[] calldata accounts, uint256[] calldata ids) external view returns (uint256[] memory out) {
        require(accounts.length == ids.length, "ERC1155: accounts and ids length mismatch");
        out = new uint256[](accounts.length);
        for (uint256 i = 0; i < accounts.length; i++) {
            out[i] = balanceOf[ids[i]][accounts[i]];
        }
    }

    function setApprovalForAll(address operator, bool approved) external {
        isApprovedForAll[msg.sender][operator] = approved;
        emit ApprovalForAll(msg.sender, operator, approved);
    }

    function mint(address to, uint256 id, uint256 value) external {
        balanceOf[id][to] += value;
        emit TransferSingle(msg.sender, address(0), to, id, value);
        _checkSingle(address(0), to, id, value, "");
    }

    function mintBatch(address to, uint256[] calldata ids, uint256[] calldata values) external {
        require(ids.length == values.length, "ERC1155: ids and values length mismatch");
        for (uint256 i = 0; i < ids.length; i++) {
            balanceOf[ids[i]][to] += values[i];
        }
        emit TransferBatch(msg.sender, address(0), to, ids, values);
        _checkBatch(address(0), to, ids, values, "");
    }

    function safeTransferFrom(address from, address to, uint256 id, uint256 value, bytes calldata data) external {
        require(from == msg.sender || isApprovedForAll[from][msg.sender], "ERC1155: caller is not token owner or approved");
        require(to != address(0), "ERC1155: transfer to the zero address");
        uint256 bal = balanceOf[id][from];
        require(bal >= value, "ERC1155: insufficient balance for transfer");
        unchecked {
            balanceOf[id][from] = bal - value;
        }
        balanceOf[id][to] += value;
        emit TransferSingle(msg.sender, from, to, id, value);
        _checkSingle(from, to, id, value, data);
    }

    function safeBatchTransferFrom(address from, address to, uint256[] calldata ids, uint256[] calldata values, bytes calldata data) external {
        require(from == msg.sender || isApprovedForAll[from][msg.sender], "ERC1155: caller is not token owner or approved");
        require(to != address(0), "ERC1155: transfer to the zero address");
        require(ids.length == values.length, "ERC1155: ids and values length mismatch");
        for (uint256 i = 0; i < ids.length; i++) {
            uint256 bal = balanceOf[ids[i]][from];
            require(bal >= values[i], "ERC1155: insufficient balance for transfer");
            unchecked {
                balanceOf[ids[i]][from] = bal - values[i];
            }
            balanceOf[ids[i]][to] += values[i];
        }
        emit TransferBatch(msg.sender, from, to, ids, values);
        _checkBatch(from, to, ids, values, data);
    }

    function _checkSingle(address from, address to, uint256 id, uint256 value, bytes memory data) internal {
        if (to.code.length > 0) {
            require(IERC1155Receiver(to).onERC1155Received(msg.sender, from, id, value, data) == IERC1155Receiver.onERC1155Received.selector,
                "ERC1155: ERC1155Receiver rejected tokens");
        }
    }

    function _checkBatch(address from, address to, uint256[] calldata ids, uint256[] calldata values, bytes memory data) internal {
        if (to.code.length > 0) {
            require(IERC1155Receiver(to).onERC1155BatchReceived(msg.sender, from, ids, values, data) == IERC1155Receiver.onERC1155BatchReceived.selector,
                "ERC1155: ERC1155Receiver rejected tokens");
        }
    }
}

interface IMoraineERC20 {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
    function balanceOf(address who) external view returns (uint256);
}

/// Relay forwards value through a chain of contracts, producing nested internal
/// transactions (calls with value several levels deep), and pulls approved tokens.
contract Relay {
    event Relayed(address indexed sender, address indexed next, uint256 value, uint256 remainingHops);
    event Probed(address indexed target, bool success);

    /// relay keeps a tenth of msg.value and forwards the rest to hops[0], which
    /// receives the remaining hops (or plain value when it is the last hop).
    function relay(address[] calldata hops) external payable {
        require(hops.length > 0, "Relay: no hops");
        uint256 forward = msg.value - msg.value / 10;
        address next = hops[0];
        if (hops.length == 1) {
            (bool ok, ) = payable(next).call{value: forward}("");
            require(ok, "Relay: transfer failed");
        } else {
            Relay(payable(next)).relay{value: forward}(hops[1:]);
        }
        emit Relayed(msg.sender, next, forward, hops.length - 1);
    }

    /// pull moves approved ERC-20 tokens from the caller to a recipient.
    function pull(address token, address to, uint256 amount) external {
        require(IMoraineERC20(token).transferFrom(msg.sender, to, amount), "Relay: pull failed");
    }

    /// probe calls target with value and data and swallows a failure: a failed
    /// inner call inside a successful transaction.
    function probe(address target, bytes calldata data) external payable returns (bool ok) {
        (ok, ) = target.call{value: msg.value}(data);
        emit Probed(target, ok);
    }

    /// sweep sends the relay's whole balance to a recipient.
    function sweep(address payable to) external {
        (bool ok, ) = to.call{value: address(this).balance}("");
        require(ok, "Relay: sweep failed");
    }

    receive() external payable {}
}

/// Factory creates contracts from inside a transaction (CREATE and CREATE2 frames).
contract Factory {
    event Created(address indexed token, address indexed creator);

    function createToken(string calldata name_, string calldata symbol_, uint8 decimals_, uint256 supply) external returns (address) {
        MoraineERC20 token = new MoraineERC20(name_, symbol_, decimals_);
        token.mint(msg.sender, supply);
        emit Created(address(token), msg.sender);
        return address(token);
    }

    function createRelay(bytes32 salt) external payable returns (address) {
        Relay r = new Relay{salt: salt}();
        if (msg.value > 0) {
            (bool ok, ) = payable(address(r)).call{value: msg.value}("");
            require(ok, "Factory: funding failed");
        }
        emit Created(address(r), msg.sender);
        return address(r);
    }
}
